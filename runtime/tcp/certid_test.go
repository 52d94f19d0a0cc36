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

// TestCertifiedImpostorGetsNoCalls runs the suite's scenario over TCP.
func TestCertifiedImpostorGetsNoCalls(t *testing.T) {
	transporttest.CertifiedImpostor(t, mutualTLS)
}

// TestRequirePeerIdentity runs the suite's scenario over TCP.
func TestRequirePeerIdentity(t *testing.T) {
	transporttest.RequirePeerIdentity(t, mutualTLS)
}

// TestCallerNamedByCertificate runs the suite's scenario over TCP.
func TestCallerNamedByCertificate(t *testing.T) {
	transporttest.CallerNamedByCertificate(t, mutualTLS)
}
