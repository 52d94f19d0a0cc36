package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"unsafe"

	"github.com/wizardmesh/wizard/runtime/introspect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// poolTransport's connections take their replies' records back
// (replyPool), as runtime/tcp's do. A call's reply is the request's value
// as an Int64Value, from a record of the transport's free list; a value
// below zero is answered with an error that names it. A released record
// is poisoned (its payload and strings overwritten) and reused by the
// next call: whoever still read it would find another call's answer.
type poolTransport struct {
	mu       sync.Mutex
	free     []*poolRecord
	out      map[*Message]*poolRecord // replies handed out, not released
	released int
	reused   int
	bad      []string
}

// poolRecord is a reply and the bytes its Payload, Error and Meta alias.
type poolRecord struct {
	m    Message
	buf  []byte
	meta [1]MetaPair
	used bool
}

func (*poolTransport) Name() string { return "pool" }

func (*poolTransport) Listen(string, Server) (Listener, error) {
	return nil, fmt.Errorf("poolTransport does not listen")
}

func (t *poolTransport) Dial(context.Context, string) (Conn, error) {
	return &poolConn{keepConn{done: make(chan struct{})}, t}, nil
}

type poolConn struct {
	keepConn // Done and Close
	t        *poolTransport
}

func (c *poolConn) Call(_ context.Context, m *Message) (*Message, error) {
	if m.Pattern == introspect.CatalogPattern {
		b, err := json.Marshal(catalog{ID: "peer", Patterns: []string{"role:r"}})
		return &Message{Codec: CodecJSON, Payload: b}, err
	}
	return c.reply(m.Payload)
}

func (c *poolConn) CallBody(_ context.Context, _ *Message, body proto.Message, _ int) (*Message, error) {
	b, err := proto.Marshal(body)
	if err != nil {
		return nil, err
	}
	return c.reply(b)
}

// reply answers a request whose payload is req.
func (c *poolConn) reply(req []byte) (*Message, error) {
	var in wrapperspb.Int64Value
	if err := proto.Unmarshal(req, &in); err != nil {
		return nil, err
	}
	t := c.t
	t.mu.Lock()
	defer t.mu.Unlock()
	var r *poolRecord
	if n := len(t.free); n > 0 {
		r, t.free = t.free[n-1], t.free[:n-1]
		t.reused++
	} else {
		r = new(poolRecord)
	}
	r.used = true
	if in.GetValue() < 0 {
		r.buf = fmt.Appendf(r.buf[:0], "no %d", in.GetValue())
		r.m = Message{Code: CodeFailedPrecondition, Error: unsafeString(r.buf)}
	} else {
		r.buf, _ = proto.MarshalOptions{}.MarshalAppend(r.buf[:0], &in)
		n := len(r.buf)
		r.buf = append(r.buf, "google.protobuf.Int64Value"...)
		r.meta[0] = MetaPair{metaType, unsafeString(r.buf[n:])}
		r.m = Message{Codec: CodecProto, Payload: r.buf[:n:n], Meta: r.meta[:]}
	}
	t.out[&r.m] = r
	return &r.m, nil
}

func (c *poolConn) ReleaseReply(m *Message) {
	t := c.t
	t.mu.Lock()
	defer t.mu.Unlock()
	r, ok := t.out[m]
	if !ok {
		t.bad = append(t.bad, "a reply released twice, or never handed out")
		return
	}
	delete(t.out, m)
	t.released++
	// Poison: a reader of this record finds another value, of another
	// type.
	full := r.buf[:cap(r.buf)]
	for i := range full {
		full[i] = 0x7f
	}
	*m = Message{}
	t.free = append(t.free, r)
}

// unsafeString is b's bytes as a string, as a transport's reply aliases
// its record: the poison reaches it.
func unsafeString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

func poolNode(t *testing.T, tr *poolTransport, opts ...Option) *Node {
	tr.out = map[*Message]*poolRecord{}
	return peerNode(t, append([]Option{WithTransport(tr)}, opts...)...)
}

func (tr *poolTransport) check(t *testing.T, released int) {
	t.Helper()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for _, b := range tr.bad {
		t.Error(b)
	}
	if tr.released != released {
		t.Errorf("%d replies released, want %d", tr.released, released)
	}
}

// A typed call gives its reply's record back once it has decoded it, and
// only then: calls in flight together never share a record, each gets
// its own answer, and answers kept after the call stay as they were.
func TestReplyReleasedByTypedCall(t *testing.T) {
	tr := &poolTransport{}
	n := poolNode(t, tr)
	c, err := NewClient[wrapperspb.Int64Value, wrapperspb.Int64Value](n, "role:r")
	if err != nil {
		t.Fatal(err)
	}
	const goroutines, calls = 4, 50
	var wg sync.WaitGroup
	kept := make([][]*wrapperspb.Int64Value, goroutines)
	for g := range goroutines {
		wg.Go(func() {
			for i := range calls {
				v := int64(g*1000 + i)
				res, err := c.Call(t.Context(), wrapperspb.Int64(v))
				if err != nil {
					t.Error(err)
					return
				}
				if res.GetValue() != v {
					t.Errorf("call %d got %d", v, res.GetValue())
				}
				kept[g] = append(kept[g], res)
			}
		})
	}
	wg.Wait()
	for g, rs := range kept {
		for i, res := range rs {
			if want := int64(g*1000 + i); res.GetValue() != want {
				t.Errorf("the answer of call %d changed after it: %d", want, res.GetValue())
			}
		}
	}
	tr.check(t, goroutines*calls)
	if tr.reused == 0 {
		t.Error("no call reused a released record")
	}
}

// A reply handed to anyone but the runtime is never released: Results of
// ActE (kept by their caller), of calls through an interceptor (kept by
// it), error answers (their message aliases the record) and typed calls
// of a non-protobuf result type. Typed calls in between release theirs,
// so a record released wrongly is reused and poisoned before the kept
// replies are read.
func TestReplyKeptIsNotReleased(t *testing.T) {
	var (
		mu          sync.Mutex
		intercepted []Result
	)
	keep := func(next Invoker) Invoker {
		return func(ctx context.Context, call *Call) (Result, error) {
			res, err := next(ctx, call)
			mu.Lock()
			intercepted = append(intercepted, res)
			mu.Unlock()
			return res, err
		}
	}
	tr := &poolTransport{}
	n := poolNode(t, tr)
	in := poolNode(t, tr, WithCallInterceptors(keep)) // shares tr's records
	typed, err := NewClient[wrapperspb.Int64Value, wrapperspb.Int64Value](n, "role:r")
	if err != nil {
		t.Fatal(err)
	}
	viaInterceptor, err := NewClient[wrapperspb.Int64Value, wrapperspb.Int64Value](in, "role:r")
	if err != nil {
		t.Fatal(err)
	}
	untypedRes, err := NewClient[wrapperspb.Int64Value, any](n, "role:r")
	if err != nil {
		t.Fatal(err)
	}

	const rounds = 20
	var acted []Result
	var failed []error
	var anys []*any
	for i := range int64(rounds) {
		res, err := n.ActE(t.Context(), "role:r", wrapperspb.Int64(100+i))
		if err != nil {
			t.Fatal(err)
		}
		acted = append(acted, res)
		if _, err := viaInterceptor.Call(t.Context(), wrapperspb.Int64(200+i)); err != nil {
			t.Fatal(err)
		}
		_, err = typed.Call(t.Context(), wrapperspb.Int64(-1-i))
		if err == nil {
			t.Fatal("a failing call succeeded")
		}
		failed = append(failed, err)
		a, err := untypedRes.Call(t.Context(), wrapperspb.Int64(300+i))
		if err != nil {
			t.Fatal(err)
		}
		anys = append(anys, a)
		for range 3 { // these release, and reuse what was released
			if res, err := typed.Call(t.Context(), wrapperspb.Int64(i)); err != nil || res.GetValue() != i {
				t.Fatal(res, err)
			}
		}
	}

	check := func(what string, res Result, want int64) {
		t.Helper()
		var got wrapperspb.Int64Value
		if err := res.Decode(&got); err != nil || got.GetValue() != want {
			t.Errorf("%s %d reads %d, %v after later calls", what, want, got.GetValue(), err)
		}
	}
	for i, res := range acted {
		check("ActE's result", res, 100+int64(i))
	}
	mu.Lock()
	got := slices.Clone(intercepted)
	mu.Unlock()
	if len(got) != rounds {
		t.Fatalf("the interceptor kept %d results, want %d", len(got), rounds)
	}
	for i, res := range got {
		check("an intercepted result", res, 200+int64(i))
	}
	for i, err := range failed {
		if want := fmt.Sprintf("no %d", -1-i); CodeOf(err) != CodeFailedPrecondition || err.(*Error).Message != want {
			t.Errorf("error %q (%v), want %q", err.(*Error).Message, CodeOf(err), want)
		}
	}
	for i, a := range anys {
		m, ok := (*a).(*wrapperspb.Int64Value)
		if !ok || m.GetValue() != 300+int64(i) {
			t.Errorf("an *any result reads %v, want %d", *a, 300+i)
		}
	}
	tr.check(t, rounds*3)
}
