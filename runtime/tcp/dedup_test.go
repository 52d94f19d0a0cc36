package tcp_test

import (
	"testing"

	"github.com/wizardmesh/wizard/runtime/internal/testkit/testpki"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/transporttest"
	"github.com/wizardmesh/wizard/runtime/tcp"
)

// TestDedupBoundToCertificate runs the suite's scenario over mutual TLS.
func TestDedupBoundToCertificate(t *testing.T) {
	p := testpki.New(t)
	transporttest.DedupBoundToIdentity(t,
		newTransport(t, tcp.WithServerTLS(p.MutualServerConfig())),
		newTransport(t, tcp.WithClientTLS(p.ClientCertConfig())),
		newTransport(t, tcp.WithClientTLS(p.OtherClientCertConfig())))
}
