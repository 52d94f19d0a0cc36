package microwizard_test

import (
	"context"
	"strings"
	"testing"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
	"github.com/wizardmesh/wizard/runtime/microwizard"
)

// TestStreamsRefused: MicroWizard and Seneca speak request/response only;
// a stream to a pattern a peer of the bridge serves is refused at open,
// clearly, with unimplemented, and nothing is sent.
func TestStreamsRefused(t *testing.T) {
	peer := fakeServer(t, func(id string) string {
		return `{"id":"` + id + `","k":"res","sync":true,"res":{"ok":true}}`
	})
	tr := newTransport(t, microwizard.WithPeer(peer, "role:feed,cmd:watch"))
	n := newNode(t, tr, runtime.WithDiscovery(tr.Discovery()))
	testwait.Until(t, "the caller reaches the peer", func() bool {
		_, err := n.Act(t.Context(), "role:feed,cmd:watch", nil)
		return err == nil
	})
	_, err := n.OpenStream(context.Background(), "role:feed,cmd:watch")
	if runtime.CodeOf(err) != runtime.CodeUnimplemented || !strings.Contains(err.Error(), "the microwizard transport carries no streams") {
		t.Fatalf("OpenStream through the MicroWizard bridge: %v (%v), want unimplemented naming the transport", runtime.CodeOf(err), err)
	}
	t.Log(err)
}
