package quic_test

import (
	"testing"

	"github.com/wizardmesh/wizard/runtime/internal/testkit/testpki"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/transporttest"
	"github.com/wizardmesh/wizard/runtime/quic"
)

// TestDedupBoundToCertificate runs the suite's scenario: a stored answer
// goes only to the certificate that made the call.
func TestDedupBoundToCertificate(t *testing.T) {
	p := testpki.New(t)
	transporttest.DedupBoundToIdentity(t,
		newTransport(t, quic.WithServerTLS(p.MutualServerConfig())),
		newTransport(t, quic.WithClientTLS(p.ClientCertConfig())),
		newTransport(t, quic.WithClientTLS(p.OtherClientCertConfig())))
}
