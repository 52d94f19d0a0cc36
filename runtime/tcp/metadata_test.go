package tcp_test

import (
	"github.com/wizardmesh/wizard/runtime"
	"testing"

	"github.com/wizardmesh/wizard/runtime/internal/testkit/testpki"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/transporttest"
	"github.com/wizardmesh/wizard/runtime/tcp"
)

// TestMetadataChain runs caller → A → B over mutual TLS: B sees only the
// metadata A copied, A's id and A's certificate.
func TestMetadataChain(t *testing.T) {
	p := testpki.New(t)
	transporttest.MetadataChain(t, "tcp",
		newTransport(t, tcp.WithClientTLS(p.OtherClientCertConfig())),
		newTransport(t, tcp.WithServerTLS(p.MutualServerConfig()), tcp.WithClientTLS(p.ClientCertConfig())),
		newTransport(t, tcp.WithServerTLS(p.MutualServerConfig())),
		"CN=other client", "CN=client")
}

// TestMessageTypes runs the typed-call scenarios over TCP.
func TestMessageTypes(t *testing.T) {
	transporttest.MessageTypes(t, func(t testing.TB) runtime.Transport { return newTransport(t) })
}
