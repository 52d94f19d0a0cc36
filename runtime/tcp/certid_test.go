package tcp_test

import (
	"crypto/tls"
	"testing"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/transporttest"
	"github.com/wizardmesh/wizard/runtime/tcp"
)

// mutualTLS makes a TCP transport of a mutual TLS mesh.
func mutualTLS(t testing.TB, server, client *tls.Config) runtime.Transport {
	return newTransport(t, tcp.WithServerTLS(server), tcp.WithClientTLS(client))
}

// TestCertifiedIdentity runs the suite's scenarios of node ids named by
// certificates over TCP: a certified impostor gets no calls, the strict
// option, the caller's certified id.
func TestCertifiedIdentity(t *testing.T) {
	transporttest.CertifiedIdentity(t, mutualTLS)
}
