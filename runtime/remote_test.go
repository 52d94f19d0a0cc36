package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/wizardmesh/wizard/runtime/discovery"
	"github.com/wizardmesh/wizard/runtime/internal/patrun"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
	"github.com/wizardmesh/wizard/runtime/introspect"
	"github.com/wizardmesh/wizard/runtime/pattern"
)

// TestServeMessageKeepsNoFrame: the strings of a received call alias the
// buffer of its whole frame, payload included; what the node caches from
// them (parsed patterns) must be copies, or one large call per pattern
// would stay in memory for as long as the cache.
func TestServeMessageKeepsNoFrame(t *testing.T) {
	n, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if err := n.Add("role:frame", func(ctx context.Context, r Request) (any, error) { return r.Get("role"), nil }); err != nil {
		t.Fatal(err)
	}
	frame := []byte("role:frame" + "cmd:over" + strings.Repeat("p", 1<<20))
	pattern := unsafe.String(&frame[0], len("role:frame"))
	over := unsafe.String(&frame[len("role:frame")], len("cmd:over"))
	reply := n.serveRemote(t.Context(), &Message{
		Pattern: pattern,
		Codec:   CodecProto,
		Meta:    []MetaPair{{metaType, "google.protobuf.Empty"}, {metaOver, over}},
	})
	if reply.Code != CodeOK {
		t.Fatalf("reply: %v %s", reply.Code, reply.Error)
	}
	start, end := uintptr(unsafe.Pointer(&frame[0])), uintptr(unsafe.Pointer(&frame[len(frame)-1]))
	inFrame := func(s string) bool {
		p := uintptr(unsafe.Pointer(unsafe.StringData(s)))
		return len(s) > 0 && p >= start && p <= end
	}
	cached := 0
	n.wire.m.Range(func(k, v any) bool {
		cached++
		tg := v.(*cachedPattern)
		strs := []string{k.(string), tg.pattern.String()}
		for _, pr := range patrun.PairsOf(tg.pattern) {
			strs = append(strs, pr.Key, pr.Value)
		}
		for _, s := range strs {
			if inFrame(s) {
				t.Errorf("the target cache keeps %q, which points into the frame", s)
			}
		}
		return true
	})
	if cached != 2 {
		t.Errorf("%d cached targets, want the pattern and Act's", cached)
	}
}

// retryTransport is a message-level transport whose connections serve the
// catalog {role:r} and record the flags of other calls; the first of them
// fails before it is sent.
type retryTransport struct {
	flags  chan MessageFlags
	failed atomic.Bool
}

func (*retryTransport) Name() string { return "retry" }

func (*retryTransport) Listen(string, Server) (Listener, error) {
	return nil, fmt.Errorf("retryTransport does not listen")
}

func (t *retryTransport) Dial(ctx context.Context, addr string) (Conn, error) {
	return &retryConn{t: t, done: make(chan struct{})}, nil
}

type retryConn struct {
	t    *retryTransport
	done chan struct{}
	once sync.Once
}

func (c *retryConn) Call(ctx context.Context, m *Message) (*Message, error) {
	if m.Pattern == introspect.CatalogPattern {
		b, err := json.Marshal(catalog{ID: "peer", Patterns: []string{"role:r"}})
		return &Message{Codec: CodecJSON, Payload: b}, err
	}
	c.t.flags <- m.Flags
	if c.t.failed.CompareAndSwap(false, true) {
		return nil, fmt.Errorf("%w: the first attempt", ErrNotSent)
	}
	return &Message{}, nil
}

func (c *retryConn) Done() <-chan struct{} { return c.done }
func (c *retryConn) Close() error          { c.once.Do(func() { close(c.done) }); return nil }

// TestCallRemoteRetryFlag: a call that surely was not sent moves on to the
// next peer, marked as a retry.
func TestCallRemoteRetryFlag(t *testing.T) {
	tr := &retryTransport{flags: make(chan MessageFlags, 4)}
	n, err := New(WithTransport(tr), WithDiscovery(StaticPeers("a", "b")))
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	testwait.Until(t, "both peers' catalogs", func() bool {
		re := n.exactRoute(pattern.MustParse("role:r"))
		if re == nil {
			return false
		}
		ps := re.peers.Load()
		return ps != nil && len(*ps) == 2
	})
	if _, err := n.ActE(t.Context(), "role:r", nil, Idempotent()); err != nil {
		t.Fatal(err)
	}
	if first, second := <-tr.flags, <-tr.flags; first != FlagIdempotent || second != FlagIdempotent|FlagRetry {
		t.Errorf("flags %03b then %03b, want %03b then %03b", first, second, FlagIdempotent, FlagIdempotent|FlagRetry)
	}
}

// TestDedupOptions: zero sizes mean the default table; WithoutDedup turns
// it off; a node that does not listen keeps none.
func TestDedupOptions(t *testing.T) {
	net := newMemNet()
	for _, tt := range []struct {
		name   string
		opts   []Option
		listen bool
		want   int // the table's bound on answers, 0 for none; -1 for no table
	}{
		{"default", nil, true, 0},
		{"zero means default", []Option{WithDedup(0, 0)}, true, 0},
		{"sized", []Option{WithDedup(100, time.Second)}, true, 100},
		{"off", []Option{WithoutDedup()}, true, -1},
		{"off, then sized again", []Option{WithoutDedup(), WithDedup(10, 0)}, true, 10},
		{"not listening", nil, false, -1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			opts := append([]Option{WithTransport(net)}, tt.opts...)
			if tt.listen {
				opts = append(opts, WithListen("dedup-"+tt.name))
			}
			n, err := New(opts...)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { n.Close() })
			got := -1
			if n.dedup != nil {
				got = 2 * n.dedup.genMax
			}
			if got != tt.want {
				t.Errorf("de-duplication table of at most %d answers, want %d", got, tt.want)
			}
		})
	}
}

// TestNilBreaker: a breaker factory that returns nil gives the target no
// breaker, as if there were no WithBreakers.
func TestNilBreaker(t *testing.T) {
	net := newMemNet()
	memNode(t, net, "srv", "role:b")
	d := &hostDiscovery{}
	made := 0
	cl, err := New(WithID("cl"), WithTransport(net), WithDiscovery(d), WithBreakers(func(*Target) Breaker { made++; return nil }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	d.host.PeerUp(discovery.Peer{Addr: "srv"})
	waitRoute(t, cl, "role:b", "srv")
	for range 3 {
		res, err := cl.Act(t.Context(), "role:b", nil)
		if err != nil || res.Value() != "srv" {
			t.Fatalf("Act = %v, %v; want srv", res.Value(), err)
		}
	}
	if made != 1 {
		t.Errorf("the factory was asked %d times, want once per target", made)
	}
}
