package runtime

import (
	"context"
	"testing"

	"github.com/wizardmesh/wizard/runtime/discovery"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
	"github.com/wizardmesh/wizard/runtime/introspect"
)

// metaSpy is a Server that hands on every call's value of one system
// metadata key before serving it.
type metaSpy struct {
	s   Server
	key string
	got chan string
}

func (m metaSpy) ServeMessage(ctx context.Context, msg *Message) *Message {
	if msg.Pattern != introspect.CatalogPattern {
		m.got <- metaValue(msg.Meta, m.key)
	}
	return m.s.ServeMessage(ctx, msg)
}

// TestCallToGlobNamesPattern: a remote call to a glob pattern without an
// overlay (an ActE, with or without mixins) carries the pattern it was
// made with (":p"), which a transport to a node that routes by it
// (MicroWizard's actE) sends; an Act (whose message carries the pairs)
// and a call to a pattern without globs carry none. Before, an ActE's
// concrete pattern did not reach the transport.
func TestCallToGlobNamesPattern(t *testing.T) {
	net := newMemNet()
	s, _ := memNode(t, net, "s", "role:m,cmd:*", "role:e,cmd:get")
	spy := metaSpy{key: metaCalled, got: make(chan string, 8)}
	net.mu.Lock()
	spy.s = net.servers["s"]
	net.servers["s"] = spy
	net.mu.Unlock()
	c, d := memNode(t, net, "c")
	d.host.PeerUp(discovery.Peer{ID: "s", Addr: "s", Digest: s.digest()})
	waitRoute(t, c, "cmd:*,role:m", "s")
	waitRoute(t, c, "cmd:get,role:e", "s")
	ctx := t.Context()
	for _, tc := range []struct {
		name string
		call func() error
		want string
	}{
		{"ActE", func() error { _, err := c.ActE(ctx, "role:m,cmd:sum", map[string]any{"a": 1}); return err }, "cmd:sum,role:m"},
		{"ActE with a mixin", func() error {
			_, err := c.ActE(ctx, "role:m", map[string]any{"cmd": "mul"}, Mixin("cmd"))
			return err
		}, "cmd:mul,role:m"},
		{"Act", func() error { _, err := c.Act(ctx, "role:m,cmd:sum", map[string]any{"a": 1}); return err }, ""},
		{"ActE without globs", func() error { _, err := c.ActE(ctx, "role:e,cmd:get", nil); return err }, ""},
	} {
		if err := tc.call(); err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if got := testwait.Recv(t, spy.got); got != tc.want {
			t.Errorf("%s: the call carried %s %q, want %q", tc.name, metaCalled, got, tc.want)
		}
	}
}
