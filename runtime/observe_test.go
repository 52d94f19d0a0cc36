package runtime

import (
	"context"
	"sync"
	"testing"
)

// recorder is an Observer that records what it is told.
type recorder struct {
	NopObserver
	mu      sync.Mutex
	nodes   []*Node
	stopped int
	events  []Event
}

func (r *recorder) Observe(n *Node) func() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.nodes = append(r.nodes, n)
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.stopped++
	}
}

func (r *recorder) Event(_ context.Context, e Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

// TestObserverLifecycle: New gives the observer the node it makes (here
// through WithOptions, which skips a nil option); the function Observe
// returned is called once when the node stops, however often it is
// closed.
func TestObserverLifecycle(t *testing.T) {
	rec := &recorder{}
	n, err := New(WithOptions(WithObserver(rec), nil))
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.nodes) != 1 || rec.nodes[0] != n || rec.stopped != 0 {
		t.Fatalf("after New: observed %v (the node %p), stopped %d times; want the node, not stopped", rec.nodes, n, rec.stopped)
	}
	n.Close()
	n.Close()
	if rec.stopped != 1 {
		t.Errorf("stopped %d times after two Close, want 1", rec.stopped)
	}
}

// TestObserverRefused: a call over the node's in-flight limit is refused
// without running its handler, and the observer is told, with the
// handler's procedure and the refusal's code; a call that runs is not an
// event.
func TestObserverRefused(t *testing.T) {
	rec := &recorder{}
	n, err := New(WithObserver(rec), WithMaxInFlight(1))
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	release, held := make(chan struct{}), make(chan struct{})
	if err := n.Add("role:hold", func(ctx context.Context, r Request) (any, error) {
		close(held)
		<-release
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := n.Add("role:work", func(ctx context.Context, r Request) (any, error) { return "done", nil }); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := n.ActE(context.Background(), "role:hold", nil)
		done <- err
	}()
	<-held
	if _, err := n.ActE(t.Context(), "role:work", nil); CodeOf(err) != CodeResourceExhausted {
		t.Fatalf("call over the limit: %v, want resource_exhausted", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := n.ActE(t.Context(), "role:work", nil); err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	want := Event{Kind: EventRefused, Spec: Spec{Procedure: "role:work"}, Code: CodeResourceExhausted}
	if len(rec.events) != 1 || rec.events[0] != want {
		t.Errorf("events %+v, want one: %+v", rec.events, want)
	}
}
