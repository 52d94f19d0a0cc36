package swim

import (
	"strings"
	"testing"

	"github.com/hashicorp/memberlist"

	"github.com/wizardmesh/wizard/runtime/internal/testkit/leak"
)

// TestPlainGossipNeedsLoopback (finding 7): gossip without keys on an
// address other than loopback needs WithInsecure; loopback needs nothing,
// keys need no more. Before, a node gossiped in the clear on any address,
// so that anyone who reached the port could join.
func TestPlainGossipNeedsLoopback(t *testing.T) {
	leak.Check(t)
	for _, bind := range []string{"0.0.0.0:0", ":0"} {
		t.Run("refused on "+bind, func(t *testing.T) {
			d := mustNew(t, WithBindAddr(bind), WithAdvertiseAddr("127.0.0.1"), WithPreset(Fast))
			err := d.Start(newFakeHost("p", "127.0.0.1:7000"))
			if err == nil {
				d.Close()
				t.Fatalf("Start on %s gossiped in the clear", bind)
			}
			want := "wizard: swim: gossip on 0.0.0.0:"
			if !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), "WithKeys") || !strings.Contains(err.Error(), "WithInsecure") {
				t.Errorf("Start = %v, want %q... naming WithKeys and WithInsecure", err, want)
			}
		})
	}

	key := make([]byte, 16)
	for _, tt := range []struct {
		name string
		opts []Option
	}{
		{"loopback", []Option{WithBindAddr("127.0.0.1:0")}},
		{"insecure", []Option{WithBindAddr("0.0.0.0:0"), WithInsecure()}},
		{"keys", []Option{WithBindAddr("0.0.0.0:0"), WithKeys(key)}},
		{"keyring through the memberlist config", []Option{WithBindAddr("0.0.0.0:0"), WithMemberlistConfig(func(c *memberlist.Config) {
			c.Keyring, _ = memberlist.NewKeyring(nil, key)
		})}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := mustNew(t, append(tt.opts, WithAdvertiseAddr("127.0.0.1"), WithPreset(Fast))...)
			if err := d.Start(newFakeHost("p", "127.0.0.1:7000")); err != nil {
				t.Fatal(err)
			}
			d.Close()
		})
	}

	if _, err := New(WithInsecure(), WithKeys(key)); err == nil || err.Error() != "wizard: swim: WithInsecure and WithKeys: choose one (WithInsecure gossips in the clear)" {
		t.Errorf("New(WithInsecure(), WithKeys(key)) = %v", err)
	}
}
