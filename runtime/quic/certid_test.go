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

// TestCertifiedIdentity runs the suite's scenarios of node ids named by
// certificates over QUIC: a certified impostor gets no calls, the strict
// option, the caller's certified id.
func TestCertifiedIdentity(t *testing.T) {
	transporttest.CertifiedIdentity(t, mutualTLS)
}
