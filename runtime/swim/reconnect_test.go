package swim

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/memberlist"
)

// addrsOf is the sorted addresses of fs.
func addrsOf(fs []failure) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.addr)
	}
	slices.Sort(out)
	return out
}

// TestFailures follows the table of failed members: what is tried, what
// is forgotten and when.
func TestFailures(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const timeout = time.Hour
	none := map[string]bool{}
	newTable := func(verify bool) *failures {
		var f failures
		f.init()
		f.setVerify(verify)
		return &f
	}

	t.Run("tried until alive again", func(t *testing.T) {
		f := newTable(false)
		f.gone("a/1", "10.0.0.1:7946", t0)
		f.gone("b/1", "10.0.0.2:7946", t0)
		f.gone("c/1", "10.0.0.3:7946", t0)
		if diff := cmp.Diff([]string{"10.0.0.1:7946", "10.0.0.2:7946", "10.0.0.3:7946"}, addrsOf(f.due(t0, none, timeout))); diff != "" {
			t.Errorf("due (-want +got):\n%s", diff)
		}
		f.alive("a/1", "10.0.0.1:7946")                     // back under its name
		f.alive("b/2", "10.0.0.2:7946")                     // restarted on its address
		f.alive("c/1", "10.0.0.9:7946")                     // its name, elsewhere (memberlist would not have it)
		f.gone("d/1", "10.0.0.4:7946", t0)                  // a live member took its address
		f.gone("e/1", "10.0.0.5:7946", t0)                  // dead too long
		f.gone("e/1", "10.0.0.6:7946", t0.Add(time.Minute)) // died again elsewhere: one entry
		live := map[string]bool{"10.0.0.4:7946": true}
		if diff := cmp.Diff([]string{"10.0.0.6:7946"}, addrsOf(f.due(t0.Add(time.Minute), live, timeout))); diff != "" {
			t.Errorf("due (-want +got):\n%s", diff)
		}
		if got := f.len(); got != 1 {
			t.Errorf("%d kept, want 1", got)
		}
		if got := f.due(t0.Add(time.Minute+timeout+1), none, timeout); len(got) != 0 || f.len() != 0 {
			t.Errorf("after the timeout: due %v, %d kept", addrsOf(got), f.len())
		}
	})

	t.Run("left or dead", func(t *testing.T) {
		f := newTable(true)
		f.gone("left/1", "10.0.0.1:7946", t0)
		f.gone("dead/1", "10.0.0.2:7946", t0)
		f.gone("forgotten/1", "10.0.0.3:7946", t0)
		f.gone("back/1", "10.0.0.4:7946", t0)
		if got := f.due(t0, none, timeout); len(got) != 0 {
			t.Errorf("due before classify: %v", addrsOf(got))
		}
		f.classify(map[string]memberlist.NodeStateType{
			"left/1": memberlist.StateLeft,
			"dead/1": memberlist.StateDead,
			"back/1": memberlist.StateAlive,
		})
		if diff := cmp.Diff([]string{"10.0.0.2:7946", "10.0.0.3:7946"}, addrsOf(f.due(t0, none, timeout))); diff != "" {
			t.Errorf("due (-want +got):\n%s", diff)
		}
		if f.pending != 0 {
			t.Errorf("%d pending", f.pending)
		}
	})

	t.Run("at most maxJoinsPerRun a round, at random", func(t *testing.T) {
		f := newTable(false)
		for i := range 10 {
			f.gone(fmt.Sprintf("m/%d", i), fmt.Sprintf("10.0.0.%d:7946", i), t0)
		}
		seen := map[string]bool{}
		for range 50 {
			got := f.due(t0, none, timeout)
			if len(got) != maxJoinsPerRun {
				t.Fatalf("%d due, want %d", len(got), maxJoinsPerRun)
			}
			for _, g := range got {
				seen[g.addr] = true
			}
		}
		if len(seen) != 10 {
			t.Errorf("%d of 10 ever chosen in 50 rounds", len(seen))
		}
	})

	t.Run("bounded", func(t *testing.T) {
		f := newTable(true)
		for i := range maxFailed + 10 {
			f.gone(fmt.Sprintf("m/%d", i), fmt.Sprintf("10.0.%d.%d:7946", i/256, i%256), t0.Add(time.Duration(i)*time.Second))
		}
		if f.len() != maxFailed || f.pending != maxFailed {
			t.Fatalf("%d kept (%d pending), want %d", f.len(), f.pending, maxFailed)
		}
		for i := range 10 {
			if _, ok := f.addrOf[fmt.Sprintf("m/%d", i)]; ok {
				t.Errorf("m/%d, among the oldest, kept", i)
			}
		}
		if _, ok := f.addrOf[fmt.Sprintf("m/%d", maxFailed+9)]; !ok {
			t.Error("the newest dropped")
		}
	})

	t.Run("backoff", func(t *testing.T) {
		f := newTable(false)
		const addr, interval = "10.0.0.1:7946", time.Second
		f.gone("a/1", addr, t0)
		now := t0
		var warned []int
		for i, want := range []time.Duration{1, 2, 3, 3, 3} {
			if f.failed(addr, now, interval) {
				warned = append(warned, i)
			}
			next := f.byAddr[addr].next
			if wait, longest := next.Sub(now), want*interval; wait < longest/2 || wait > longest {
				t.Errorf("failure %d: next attempt in %v, want within [%v, %v]", i+1, wait, longest/2, longest)
			}
			if got := f.due(next.Add(-time.Nanosecond), none, timeout); len(got) != 0 {
				t.Errorf("failure %d: due before its time", i+1)
			}
			if got := f.due(next, none, timeout); len(got) != 1 {
				t.Errorf("failure %d: not due at its time", i+1)
			}
			now = next
		}
		if diff := cmp.Diff([]int{2}, warned); diff != "" {
			t.Errorf("warned after failures (-want +got):\n%s", diff)
		}
	})
}
