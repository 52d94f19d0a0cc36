package nats_test

import (
	"testing"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/natstest"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/transporttest"
)

// TestMetadataChain runs caller → A → B through the broker: B sees only
// the metadata A copied and A's id. The certificate subjects are empty:
// a broker verifies no caller per call (the nodes' TLS and credentials
// are with the broker), so a handler sees no certificate.
func TestMetadataChain(t *testing.T) {
	b := natstest.Start(t)
	transporttest.MetadataChain(t, "nats", newTransport(t, b.URL()), newTransport(t, b.URL()), newTransport(t, b.URL()), "", "")
}

// TestMessageTypes runs the typed-call scenarios over NATS.
func TestMessageTypes(t *testing.T) {
	b := natstest.Start(t)
	transporttest.MessageTypes(t, func(t testing.TB) runtime.Transport { return newTransport(t, b.URL()) })
}
