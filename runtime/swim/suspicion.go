package swim

import (
	"context"
	"errors"
	"maps"
	"reflect"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// memberlist reports joins, updates and leaves, but not suspicion: a
// member turning suspect, or alive again after refuting it, changes only
// the State of memberlist's internal record of it (the State of the
// memberlist.Node that Members returns is never updated). memberlist
// exports no way to read that state, so stateReader reads its node table
// by reflection, under memberlist's own lock, once per probe interval. If
// a memberlist release changes those internals, suspicion goes unreported
// (logged once) and everything else works; TestStateReader catches it.

// stateReader reads the states of memberlist's members.
type stateReader struct {
	mu    *sync.RWMutex // memberlist's nodeLock
	nodes reflect.Value // memberlist's nodes field, a []*nodeState
	name  []int         // index of Name in nodeState (promoted from Node)
	state []int         // index of nodeState's own State
}

func newStateReader(ml *memberlist.Memberlist) (*stateReader, error) {
	v := reflect.ValueOf(ml).Elem()
	lock := v.FieldByName("nodeLock")
	if !lock.IsValid() || lock.Type() != reflect.TypeFor[sync.RWMutex]() {
		return nil, errors.New("no nodeLock sync.RWMutex in memberlist.Memberlist")
	}
	nodes := v.FieldByName("nodes")
	if !nodes.IsValid() || nodes.Kind() != reflect.Slice || nodes.Type().Elem().Kind() != reflect.Pointer ||
		nodes.Type().Elem().Elem().Kind() != reflect.Struct {
		return nil, errors.New("no nodes []*nodeState in memberlist.Memberlist")
	}
	st := nodes.Type().Elem().Elem()
	name, ok := st.FieldByName("Name")
	if !ok || name.Type.Kind() != reflect.String {
		return nil, errors.New("no Name string in memberlist's nodeState")
	}
	state, ok := st.FieldByName("State")
	if !ok || state.Type != reflect.TypeFor[memberlist.NodeStateType]() || len(state.Index) != 1 {
		return nil, errors.New("no State NodeStateType of its own in memberlist's nodeState")
	}
	return &stateReader{
		mu:    (*sync.RWMutex)(lock.Addr().UnsafePointer()),
		nodes: nodes,
		name:  name.Index,
		state: state.Index,
	}, nil
}

// states returns the state of every member memberlist's table holds:
// live ones, and dead and left ones it has not forgotten yet
// (GossipToTheDeadTime after their death).
func (r *stateReader) states() map[string]memberlist.NodeStateType {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make(map[string]memberlist.NodeStateType, r.nodes.Len())
	for i := range r.nodes.Len() {
		n := r.nodes.Index(i).Elem()
		out[n.FieldByIndex(r.name).String()] = memberlist.NodeStateType(n.FieldByIndex(r.state).Int())
	}
	return out
}

// read returns every live member (alive or suspect): name → suspect.
func (r *stateReader) read() map[string]bool { return liveStates(r.states()) }

// liveStates is the live members of states (alive or suspect): name →
// suspect.
func liveStates(states map[string]memberlist.NodeStateType) map[string]bool {
	out := make(map[string]bool, len(states))
	for name, s := range states {
		switch s {
		case memberlist.StateAlive:
			out[name] = false
		case memberlist.StateSuspect:
			out[name] = true
		}
	}
	return out
}

// runSuspicionWatch reports suspicion changes, and tells the failed
// members apart from those that left, until Close.
func (d *Discovery) runSuspicionWatch(ctx context.Context, r *stateReader) {
	defer d.wg.Done()
	tick := time.NewTicker(d.mlConfig.ProbeInterval)
	defer tick.Stop()
	var last map[string]bool
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		all := r.states()
		d.failed.classify(all)
		if states := liveStates(all); !maps.Equal(states, last) {
			d.events.push(event{suspect: states})
			last = states
		}
	}
}
