package transporttest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/discovery"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
	"github.com/wizardmesh/wizard/runtime/introspect"
)

// gatedDiscovery is a Discovery whose Start and Close wait for their
// gates: a node held in its start, or in leaving the mesh.
type gatedDiscovery struct {
	start, close *Gate
	started      chan struct{} // Start was called
	closing      chan struct{} // Close was called
}

func (d *gatedDiscovery) Start(discovery.Host) error {
	close(d.started)
	<-d.start.C()
	return nil
}

func (d *gatedDiscovery) Close() error {
	close(d.closing)
	<-d.close.C()
	return nil
}

// probe asks the node at addr for its health over a connection of its
// own, as a probe does.
func (s suite) probe(t *testing.T, addr string) (runtime.Health, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), testwait.Guard)
	defer cancel()
	c, err := s.tr(t).Dial(ctx, addr)
	if err != nil {
		return runtime.HealthNotServing, err
	}
	defer c.Close()
	return runtime.CheckHealth(ctx, c)
}

// health follows a node through its states as probes over the transport
// and the node itself see them: not serving while it starts (listening,
// its discovery not started), serving (even over its in-flight limit),
// draining from the first moment of Shutdown (while it leaves the mesh,
// then with a call in flight after its goaway, when probes get no answer
// but Health still says draining), not serving once Shutdown returns.
func (s suite) health(t *testing.T) {
	d := &gatedDiscovery{start: NewGate(t), close: NewGate(t), started: make(chan struct{}), closing: make(chan struct{})}
	defer d.start.Open()
	defer d.close.Open()
	addr := FreeAddr(t)
	made := make(chan *runtime.Node, 1)
	go func() {
		n, err := runtime.New(runtime.WithTransport(s.tr(t)), runtime.WithListen(addr), runtime.WithDiscovery(d), runtime.WithMaxInFlight(1))
		if err != nil {
			t.Error(err)
		}
		made <- n
	}()
	testwait.Recv(t, d.started)
	if h, err := s.probe(t, addr); h != runtime.HealthNotServing || err != nil {
		t.Errorf("while starting: %v, %v; want not_serving", h, err)
	}
	d.start.Open()
	n := testwait.Recv(t, made)
	if n == nil {
		t.FailNow()
	}
	t.Cleanup(func() { n.Close() })
	if !n.Ready() || n.Health() != runtime.HealthServing {
		t.Errorf("started: Ready %v, Health %v; want true, serving", n.Ready(), n.Health())
	}
	if err := n.Add(introspect.HealthPattern, func(context.Context, runtime.Request) (any, error) { return "mine", nil }); runtime.CodeOf(err) != runtime.CodeInvalidArgument {
		t.Errorf("Add(HealthPattern) = %v; want invalid_argument", err)
	}
	started := make(chan struct{}, 1)
	release := NewGate(t)
	defer release.Open()
	MustAdd(t, n, "role:health,cmd:hold", func(ctx context.Context, r runtime.Request) (any, error) {
		started <- struct{}{}
		<-release.C()
		return "held", nil
	})
	cl := NewClient(t, s.tr(t), "role:health,cmd:hold", nil, addr)
	call := make(chan Outcome, 1)
	go func() {
		res, err := cl.ActE(context.Background(), "role:health,cmd:hold", nil, runtime.Timeout(time.Minute))
		call <- Outcome{res.Value(), err}
	}()
	testwait.Recv(t, started)
	// Its one in-flight slot is taken: it sheds calls, but serves.
	if h, err := s.probe(t, addr); h != runtime.HealthServing || err != nil {
		t.Errorf("serving, over its in-flight limit: %v, %v; want serving", h, err)
	}

	// A probe that keeps its connection, as a peer does.
	kept, err := s.tr(t).Dial(t.Context(), addr)
	if err != nil {
		t.Fatal(err)
	}
	defer kept.Close()

	shut := make(chan error, 1)
	go func() { shut <- n.Shutdown(context.Background()) }()
	testwait.Recv(t, d.closing)
	if n.Ready() || n.Health() != runtime.HealthDraining {
		t.Errorf("leaving the mesh: Ready %v, Health %v; want false, draining", n.Ready(), n.Health())
	}
	if h, err := s.probe(t, addr); h != runtime.HealthDraining || err != nil {
		t.Errorf("leaving the mesh: %v, %v; want draining", h, err)
	}
	d.close.Open()
	// After the goaway, a call on a probe's connection is refused unsent:
	// the probe learns the node does not serve.
	testwait.Until(t, "the probe gets no answer after the goaway", func() bool {
		_, err := runtime.CheckHealth(t.Context(), kept)
		return err != nil
	})
	if _, err := runtime.CheckHealth(t.Context(), kept); !errors.Is(err, runtime.ErrNotSent) {
		t.Errorf("probe after the goaway: %v; want an error that matches ErrNotSent", err)
	}
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned %v with a call in flight", err)
	default:
	}
	if n.Ready() || n.Health() != runtime.HealthDraining {
		t.Errorf("draining a call: Ready %v, Health %v; want false, draining", n.Ready(), n.Health())
	}
	release.Open()
	if r := testwait.Recv(t, call); r.V != "held" || r.Err != nil {
		t.Errorf("the call in flight = %v, %v", r.V, r.Err)
	}
	if err := testwait.Recv(t, shut); err != nil {
		t.Errorf("Shutdown = %v", err)
	}
	if n.Ready() || n.Health() != runtime.HealthNotServing {
		t.Errorf("shut down: Ready %v, Health %v; want false, not_serving", n.Ready(), n.Health())
	}
}
