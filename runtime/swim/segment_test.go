package swim_test

import (
	"context"
	"strings"
	"testing"

	"github.com/wizardmesh/wizard/runtime/internal/testkit/leak"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testlog"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
	"github.com/wizardmesh/wizard/runtime/swim"
)

// TestSegments runs two segments of two nodes each, every node seeded
// with the other segment's first node before its own: each segment forms,
// the other segment's first node turns the joins away, and no node ever
// routes a pattern of the other segment.
func TestSegments(t *testing.T) {
	leak.Check(t)
	var blueLog, greenLog testlog.Buffer
	blue0 := startMember(t, "blue0", swim.WithSegment("blue"), swim.WithLogger(blueLog.Logger()))
	green0 := startMember(t, "green0", swim.WithSegment("green"), swim.WithLogger(greenLog.Logger()))
	blue1 := startMember(t, "blue1", swim.WithSegment("blue"), swim.WithSeeds(green0.d.GossipAddr(), blue0.d.GossipAddr()))
	green1 := startMember(t, "green1", swim.WithSegment("green"), swim.WithSeeds(blue0.d.GossipAddr(), green0.d.GossipAddr()))
	blue, green := []*member{blue0, blue1}, []*member{green0, green1}
	t.Cleanup(func() { closeAll(append(blue, green...)) })

	waitRoutable(t, blue, blue0.pattern(), blue1.pattern())
	waitRoutable(t, green, green0.pattern(), green1.pattern())
	// Evidence that each segment knocked on the other's door.
	for name, l := range map[string]*testlog.Buffer{"blue0": &blueLog, "green0": &greenLog} {
		testwait.Until(t, name+" never turned a join from the other segment away", func() bool {
			return strings.Contains(l.String(), "unacceptable label")
		})
	}
	ctx := context.Background()
	for _, ms := range [][]*member{blue, green} {
		for _, m := range ms {
			if n := m.d.NumMembers(); n != 2 {
				t.Errorf("%s knows %d members, want 2", m.id, n)
			}
		}
	}
	for _, b := range blue {
		for _, g := range green {
			if !notFound(ctx, b, g.pattern()) {
				t.Errorf("%s routes %s", b.id, g.pattern())
			}
			if !notFound(ctx, g, b.pattern()) {
				t.Errorf("%s routes %s", g.id, b.pattern())
			}
		}
	}
}
