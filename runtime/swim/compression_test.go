package swim_test

import (
	"testing"

	"github.com/hashicorp/memberlist"

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
		addEverywhere(t, ms, m, "role:swimtest,added:"+m.id)
	}
}
