package runtime

import (
	"context"

	"github.com/wizardmesh/wizard/runtime/internal/patrun"
)

// WaitForEventMembers waits until n's routing holds k members (this node
// counted once, each peer once) with a subscription matching pattern.
func WaitForEventMembers(ctx context.Context, n *Node, pattern string, k int) error {
	t, err := n.parsed.get(pattern)
	if err != nil {
		return err
	}
	for {
		n.routeMu.Lock()
		ch := n.changed
		n.routeMu.Unlock()
		var e emitCall
		n.broadcastTargets(&e, patrun.PairsOf(t.pattern))
		if len(e.ds) >= k {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
