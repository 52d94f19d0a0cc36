package durable

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/natstest"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testlog"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
	"github.com/wizardmesh/wizard/runtime/tcp"
)

// startJetStream starts an embedded broker with JetStream, its store in
// a directory of the test's.
func startJetStream(t testing.TB) *natstest.Broker {
	t.Helper()
	dir := t.TempDir()
	return natstest.Start(t, func(o *server.Options) {
		o.JetStream = true
		o.StoreDir = dir
	})
}

// member is a node with a NATS connection of its own and the space's
// Events on it.
type member struct {
	node *runtime.Node
	nc   *natsgo.Conn
	js   jetstream.JetStream
	ev   *Events
	log  *testlog.Buffer
}

// newMember makes a member of the mesh on urls: a node listening on TCP
// (so it keeps a de-duplication table) and the event space on it.
func newMember(t testing.TB, urls []string, space string, opts ...Option) *member {
	t.Helper()
	m, err := tryMember(t, urls, space, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// tryMember is newMember, returning New's error (what it made closed).
func tryMember(t testing.TB, urls []string, space string, opts ...Option) (*member, error) {
	t.Helper()
	m := &member{log: &testlog.Buffer{}}
	tr, err := tcp.New()
	if err != nil {
		t.Fatal(err)
	}
	m.node, err = runtime.New(runtime.WithTransport(tr), runtime.WithListen("127.0.0.1:0"), runtime.WithService("svc"), runtime.WithLogger(m.log.Logger()))
	if err != nil {
		t.Fatal(err)
	}
	m.nc, err = natsgo.Connect(strings.Join(urls, ","), natsgo.MaxReconnects(-1), natsgo.ReconnectWait(50*time.Millisecond), natsgo.ReconnectJitter(0, 0))
	if err != nil {
		m.node.Close()
		t.Fatal(err)
	}
	if m.js, err = jetstream.New(m.nc); err != nil {
		t.Fatal(err)
	}
	opts = append([]Option{WithLogger(slog.New(slog.NewTextHandler(m.log, &slog.HandlerOptions{Level: slog.LevelDebug})))}, opts...)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	m.ev, err = New(ctx, m.node, m.js, space, opts...)
	if err != nil {
		m.nc.Close()
		m.node.Close()
		return nil, err
	}
	t.Cleanup(func() {
		m.ev.Close()
		m.nc.Close()
		m.node.Close()
		if t.Failed() {
			t.Logf("the log of member %s:\n%s", m.ev.id, m.log)
		}
	})
	return m, nil
}

// tally counts the handlers' runs that finished without error, by group
// and event id.
type tally struct {
	mu   sync.Mutex
	runs map[string]map[string]int
}

func newTally() *tally { return &tally{runs: map[string]map[string]int{}} }

func (ta *tally) add(group, id string) {
	ta.mu.Lock()
	defer ta.mu.Unlock()
	if ta.runs[group] == nil {
		ta.runs[group] = map[string]int{}
	}
	ta.runs[group][id]++
}

// covered reports whether every id ran in every group.
func (ta *tally) covered(groups, ids []string) bool {
	ta.mu.Lock()
	defer ta.mu.Unlock()
	for _, g := range groups {
		for _, id := range ids {
			if ta.runs[g][id] == 0 {
				return false
			}
		}
	}
	return true
}

// check fails t unless every id ran exactly once in every group, and
// nothing else ran.
func (ta *tally) check(t *testing.T, groups, ids []string) {
	t.Helper()
	ta.mu.Lock()
	defer ta.mu.Unlock()
	for _, g := range groups {
		if len(ta.runs[g]) != len(ids) {
			t.Errorf("group %s ran %d events, want %d", g, len(ta.runs[g]), len(ids))
		}
		for _, id := range ids {
			if n := ta.runs[g][id]; n != 1 {
				t.Errorf("group %s ran event %s %d times, want once", g, id, n)
			}
		}
	}
}

// counting is a handler that counts its run in the tally.
func counting(ta *tally) runtime.Handler {
	return func(ctx context.Context, req runtime.Request) (any, error) {
		id, ok := req.String("id")
		if !ok {
			return nil, errors.New("no id")
		}
		ta.add(req.Group(), id)
		return nil, nil
	}
}

// emitN emits n events "role:order,event:placed" with ids prefix0... and
// returns the ids.
func emitN(t *testing.T, ev *Events, prefix string, n int) []string {
	t.Helper()
	var ids []string
	for i := range n {
		id := fmt.Sprintf("%s%d", prefix, i)
		if _, err := ev.Emit(t.Context(), "role:order,event:placed", map[string]any{"id": id}); err != nil {
			t.Fatalf("Emit %s: %v", id, err)
		}
		ids = append(ids, id)
	}
	return ids
}

// drained waits until the groups' consumers have nothing pending.
func drained(t *testing.T, ev *Events, groups ...string) {
	t.Helper()
	for _, g := range groups {
		testwait.Until(t, "group "+g+" drained", func() bool {
			st, err := ev.Stats(t.Context(), g)
			return err == nil && st.Pending == 0
		})
	}
}

var errCrashed = errors.New("crashed")
