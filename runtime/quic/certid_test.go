package quic_test

import (
	"crypto/tls"
	"testing"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/transporttest"
	"github.com/wizardmesh/wizard/runtime/quic"
)

// mutualTLS makes a QUIC transport of a mutual TLS mesh.
func mutualTLS(t testing.TB, server, client *tls.Config) runtime.Transport {
	return newTransport(t, quic.WithServerTLS(server), quic.WithClientTLS(client))
}

// TestCertifiedImpostorGetsNoCalls runs the suite's scenario over QUIC.
func TestCertifiedImpostorGetsNoCalls(t *testing.T) {
	transporttest.CertifiedImpostor(t, mutualTLS)
}

// TestRequirePeerIdentity runs the suite's scenario over QUIC.
func TestRequirePeerIdentity(t *testing.T) {
	transporttest.RequirePeerIdentity(t, mutualTLS)
}

// TestCallerNamedByCertificate runs the suite's scenario over QUIC.
func TestCallerNamedByCertificate(t *testing.T) {
	transporttest.CallerNamedByCertificate(t, mutualTLS)
}
