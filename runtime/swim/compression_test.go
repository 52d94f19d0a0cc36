package swim_test

import (
	"context"
	"testing"

	"github.com/hashicorp/memberlist"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/swim"
)

// TestCompressionMixed: members that compress their gossip and members
// that do not (the presets' default) form one mesh, route each other,
// and hear of a pattern added later, whichever kind announces it: a
// fleet can change the setting one member at a time.
func TestCompressionMixed(t *testing.T) {
	compress := swim.WithMemberlistConfig(func(c *memberlist.Config) { c.EnableCompression = true })
	a := startMember(t, "z0", compress)
	b := startMember(t, "z1", swim.WithSeeds(a.d.GossipAddr()))
	c := startMember(t, "z2", compress, swim.WithSeeds(b.d.GossipAddr()))
	ms := []*member{a, b, c}
	t.Cleanup(func() { closeAll(ms) })
	for _, m := range ms {
		waitRoutable(t, ms, m.pattern())
	}
	for _, m := range []*member{a, b} { // one of each kind announces a change
		added := "role:swimtest,added:" + m.id
		if err := m.n.Add(added, func(ctx context.Context, r runtime.Request) (any, error) {
			return map[string]any{"id": m.id}, nil
		}); err != nil {
			t.Fatal(err)
		}
		waitRoutable(t, ms, added)
		for _, from := range ms {
			callEventually(t, from, added, m.id)
		}
	}
}
