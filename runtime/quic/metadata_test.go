package quic_test

import (
	"github.com/wizardmesh/wizard/runtime"
	"testing"

	"github.com/wizardmesh/wizard/runtime/internal/testkit/testpki"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/transporttest"
	"github.com/wizardmesh/wizard/runtime/quic"
)

// TestMetadataChain runs caller → A → B over QUIC with client
// certificates: B sees only the metadata A copied, A's id and A's
// certificate.
func TestMetadataChain(t *testing.T) {
	p := testpki.New(t)
	transporttest.MetadataChain(t, "quic",
		newTransport(t, quic.WithServerTLS(p.MutualServerConfig()), quic.WithClientTLS(p.OtherClientCertConfig())),
		newTransport(t, quic.WithServerTLS(p.MutualServerConfig()), quic.WithClientTLS(p.ClientCertConfig())),
		newTransport(t, quic.WithServerTLS(p.MutualServerConfig()), quic.WithClientTLS(p.ClientCertConfig())),
		"CN=other client", "CN=client")
}

// TestMessageTypes runs the typed-call scenarios over QUIC.
func TestMessageTypes(t *testing.T) {
	p := testpki.New(t)
	transporttest.MessageTypes(t, func(t testing.TB) runtime.Transport { return transport(t, p) })
}
