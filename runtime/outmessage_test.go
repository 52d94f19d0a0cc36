package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
	"github.com/wizardmesh/wizard/runtime/introspect"
	"github.com/wizardmesh/wizard/runtime/pattern"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// keepTransport's connections serve the catalog {role:r} and answer every
// other call with an empty reply. A plain one keeps every message it
// gets, with a copy of what it held then; a body one (withBody) encodes
// requests itself, keeps nothing and records the messages in flight.
type keepTransport struct {
	withBody bool

	mu       sync.Mutex
	kept     []*Message
	copies   []Message
	inFlight map[*Message]bool
	reused   int // calls that got a message an earlier call had
	seen     map[*Message]bool
	bad      []string // what went wrong, reported by the test
}

func (*keepTransport) Name() string { return "keep" }

func (*keepTransport) Listen(string, Server) (Listener, error) {
	return nil, fmt.Errorf("keepTransport does not listen")
}

func (t *keepTransport) Dial(context.Context, string) (Conn, error) {
	c := &keepConn{t: t, done: make(chan struct{})}
	if t.withBody {
		return &keepBodyConn{c}, nil
	}
	return c, nil
}

type keepConn struct {
	t    *keepTransport
	done chan struct{}
	once sync.Once
}

func (c *keepConn) Call(_ context.Context, m *Message) (*Message, error) {
	if m.Pattern == introspect.CatalogPattern {
		b, err := json.Marshal(catalog{ID: "peer", Patterns: []string{"role:r"}})
		return &Message{Codec: CodecJSON, Payload: b}, err
	}
	t := c.t
	t.mu.Lock()
	defer t.mu.Unlock()
	t.kept = append(t.kept, m)
	cp := *m
	cp.Meta = slices.Clone(m.Meta)
	cp.Payload = slices.Clone(m.Payload)
	t.copies = append(t.copies, cp)
	return &Message{}, nil
}

func (c *keepConn) Done() <-chan struct{} { return c.done }
func (c *keepConn) Close() error          { c.once.Do(func() { close(c.done) }); return nil }

type keepBodyConn struct{ *keepConn }

// Call serves the catalog only: every other call of the test is a body's.
func (c *keepBodyConn) Call(ctx context.Context, m *Message) (*Message, error) {
	if m.Pattern != introspect.CatalogPattern {
		c.t.mu.Lock()
		c.t.bad = append(c.t.bad, "a call's request was encoded by the node")
		c.t.mu.Unlock()
	}
	return c.keepConn.Call(ctx, m)
}

func (c *keepBodyConn) CallBody(_ context.Context, m *Message, body proto.Message, _ int) (*Message, error) {
	t := c.t
	t.mu.Lock()
	if t.inFlight[m] {
		t.bad = append(t.bad, "two calls in flight share a message")
	}
	if t.seen[m] {
		t.reused++
	}
	t.inFlight[m], t.seen[m] = true, true
	want := fmt.Sprint(body.(*wrapperspb.Int64Value).GetValue())
	t.mu.Unlock()

	got := metaValue(m.Meta, "k") // the caller's metadata: its own value
	t.mu.Lock()
	if got != want || m.Pattern != "role:r" {
		t.bad = append(t.bad, fmt.Sprintf("a call for %q got pattern %q, metadata %q", want, m.Pattern, got))
	}
	delete(t.inFlight, m)
	t.mu.Unlock()
	return &Message{}, nil
}

func keepNode(t *testing.T, tr *keepTransport) *Node {
	tr.inFlight, tr.seen = map[*Message]bool{}, map[*Message]bool{}
	return peerNode(t, WithTransport(tr))
}

// peerNode is a node over opts' transport whose one static peer, "a",
// serves role:r, once it routes role:r to it; closed at cleanup.
func peerNode(t *testing.T, opts ...Option) *Node {
	n, err := New(append([]Option{WithDiscovery(StaticPeers("a"))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	testwait.Until(t, "the peer's catalog", func() bool {
		re := n.exactRoute(pattern.MustParse("role:r"))
		if re == nil {
			return false
		}
		ps := re.peers.Load()
		return ps != nil && len(*ps) == 1
	})
	return n
}

// A call's message is reused once the call is over, and only then, when
// only connections that keep nothing of it had it: calls in flight
// together never share one, and each carries its own contents.
func TestOutMessageReusedAfterCall(t *testing.T) {
	tr := &keepTransport{withBody: true}
	n := keepNode(t, tr)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 50 {
				v := fmt.Sprint(g*1000 + i)
				ctx := AppendMetadata(t.Context(), "k", v)
				if _, err := n.ActE(ctx, "role:r", wrapperspb.Int64(int64(g*1000+i))); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for _, b := range tr.bad {
		t.Error(b)
	}
	if tr.reused == 0 {
		t.Errorf("no call reused an earlier call's message")
	}
}

// A connection that may keep a call's message (one without CallBody)
// finds it as it was, however many calls follow: the node never reuses
// a message such a connection had.
func TestOutMessageKeptByConn(t *testing.T) {
	tr := &keepTransport{}
	n := keepNode(t, tr)
	for i := range 100 {
		v := fmt.Sprint(i)
		ctx := AppendMetadata(t.Context(), "k", v)
		if _, err := n.ActE(ctx, "role:r", wrapperspb.Int64(int64(i))); err != nil {
			t.Fatal(err)
		}
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if len(tr.kept) != 100 {
		t.Fatalf("%d calls kept, want 100", len(tr.kept))
	}
	for i, m := range tr.kept {
		cp := tr.copies[i]
		if m.Pattern != cp.Pattern || m.Flags != cp.Flags || !slices.Equal(m.Meta, cp.Meta) || string(m.Payload) != string(cp.Payload) {
			t.Fatalf("call %d's message changed after the call: %v, was %v", i, m.Meta, cp.Meta)
		}
	}
}
