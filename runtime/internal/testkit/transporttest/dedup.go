package transporttest

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/introspect"
)

// DedupBoundToIdentity checks that a stored answer is given only to a
// caller the transport identifies as the one that made the call. srv
// serves with mutual TLS; a and b dial with two different client
// certificates. The same call (same token, id, pattern and payload) sent
// again through a on a new connection gets the stored answer; sent
// through b — by a caller that learnt the token — it runs as a call of
// its own.
func DedupBoundToIdentity(t *testing.T, srv, a, b runtime.Transport) {
	var runs atomic.Int64
	n := NewServer(t, srv)
	MustAdd(t, n, "role:bank,cmd:transfer", func(ctx context.Context, req runtime.Request) (any, error) {
		return map[string]any{"run": runs.Add(1)}, nil
	})
	var id [8]byte
	binary.BigEndian.PutUint64(id[:], 42)
	call := func(tr runtime.Transport) string {
		t.Helper()
		conn, err := tr.Dial(t.Context(), n.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		reply, err := conn.Call(t.Context(), &runtime.Message{
			Pattern: "cmd:transfer,role:bank",
			Flags:   runtime.FlagKeep,
			Codec:   runtime.CodecJSON,
			Payload: []byte(`{"amount":5}`),
			Meta:    []runtime.MetaPair{{Key: ":c", Value: "victim"}, {Key: ":i", Value: string(id[:])}, {Key: ":k", Value: "0123456789abcdef"}},
		})
		if err != nil || reply.Code != runtime.CodeOK {
			t.Fatalf("call = %+v, %v", reply, err)
		}
		return string(reply.Payload)
	}
	first := call(a)
	if again := call(a); again != first || runs.Load() != 1 {
		t.Errorf("the same caller on a new connection got %s after %s (%d runs); want the stored answer", again, first, runs.Load())
	}
	if other := call(b); other == first || runs.Load() != 2 {
		t.Errorf("another certificate got %s after %s (%d runs); want a run of its own", other, first, runs.Load())
	}
}

// The attacks on de-duplication: a service the victim calls learns the
// metadata of the victim's calls (its node id and call ids) and uses it,
// on a connection of its own, to take answers the bank stored for the
// victim (theft) or to store answers for the victim's next calls before
// the victim makes them (planting).

// spy is a hostile service: a bare listener that serves a catalog, so
// that the victim routes to it, and records the metadata of every call.
type spy struct {
	mu   sync.Mutex
	meta []runtime.MetaPair // of the last call, copied
}

func (s *spy) ServeMessage(ctx context.Context, m *runtime.Message) *runtime.Message {
	if m.Pattern == introspect.CatalogPattern {
		return &runtime.Message{Codec: runtime.CodecJSON, Payload: []byte(`{"id":"spy","patterns":["cmd:hello,role:spy"]}`)}
	}
	s.mu.Lock()
	s.meta = s.meta[:0]
	for _, p := range m.Meta {
		s.meta = append(s.meta, runtime.MetaPair{Key: strings.Clone(p.Key), Value: strings.Clone(p.Value)})
	}
	s.mu.Unlock()
	return &runtime.Message{Codec: runtime.CodecJSON, Payload: []byte(`{"hello":true}`)}
}

// seen returns the metadata of the spy's last call with its 8-byte value
// (the call id the victim sent) as a number, and the call id's key.
func (s *spy) seen(t *testing.T) ([]runtime.MetaPair, string, uint64) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.meta {
		if len(p.Value) == 8 {
			return append([]runtime.MetaPair(nil), s.meta...), p.Key, binary.BigEndian.Uint64([]byte(p.Value))
		}
	}
	t.Fatalf("the spy saw no call id in %q", s.meta)
	return nil, "", 0
}

// forge returns meta with the call id under idKey replaced by id.
func forge(meta []runtime.MetaPair, idKey string, id uint64) []runtime.MetaPair {
	out := append([]runtime.MetaPair(nil), meta...)
	for i, p := range out {
		if p.Key == idKey {
			var b [8]byte
			binary.BigEndian.PutUint64(b[:], id)
			out[i].Value = string(b[:])
		}
	}
	return out
}

// dedupWorld is a bank serving a secret, transfers and pings over TCP, a
// spy, a victim that routes to both, and the spy's own connection to the
// bank.
type dedupWorld struct {
	bank      *runtime.Node
	transfers atomic.Int64
	spy       *spy
	victim    *runtime.Node
	attacker  runtime.Conn
}

func (s suite) newDedupWorld(t *testing.T) *dedupWorld {
	t.Helper()
	w := &dedupWorld{spy: &spy{}}
	w.bank = NewServer(t, s.tr(t))
	MustAdd(t, w.bank, "role:bank,cmd:token", func(ctx context.Context, req runtime.Request) (any, error) {
		return map[string]any{"token": "s3cr3t"}, nil
	})
	MustAdd(t, w.bank, "role:bank,cmd:transfer", func(ctx context.Context, req runtime.Request) (any, error) {
		w.transfers.Add(1)
		return map[string]any{"transferred": req.Get("amount")}, nil
	})
	MustAdd(t, w.bank, "role:bank,cmd:ping", func(ctx context.Context, req runtime.Request) (any, error) {
		return map[string]any{"pong": true}, nil
	})
	tr := s.tr(t)
	l, err := tr.Listen("127.0.0.1:0", w.spy)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	w.victim = NewClient(t, s.tr(t), "role:bank,cmd:transfer", nil, w.bank.Addr(), l.Addr())
	WaitRoutable(t, w.victim, "role:spy,cmd:hello")
	w.attacker, err = tr.Dial(t.Context(), w.bank.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.attacker.Close() })
	return w
}

// hello makes the victim call the spy, which then knows the victim's last
// call id.
func (w *dedupWorld) hello(t *testing.T) ([]runtime.MetaPair, string, uint64) {
	t.Helper()
	if _, err := w.victim.Act(t.Context(), "role:spy,cmd:hello", nil); err != nil {
		t.Fatalf("the victim's call to the spy: %v", err)
	}
	return w.spy.seen(t)
}

// attack sends a ping to the bank as the spy forged it: the victim's
// metadata with call id id.
func (w *dedupWorld) attack(t *testing.T, meta []runtime.MetaPair, idKey string, id uint64) string {
	t.Helper()
	reply, err := w.attacker.Call(t.Context(), &runtime.Message{
		Pattern: "cmd:ping,role:bank",
		Flags:   runtime.FlagKeep,
		Codec:   runtime.CodecJSON,
		Payload: []byte(`{}`),
		Meta:    forge(meta, idKey, id),
	})
	if err != nil {
		t.Fatalf("the forged call: %v", err)
	}
	if reply.Code != runtime.CodeOK {
		return fmt.Sprintf("%v: %s", reply.Code, reply.Error)
	}
	return string(reply.Payload)
}

// dedupAnswerNotStolen: the spy cannot take the answer the bank stored
// for the victim's call, however it forges the call's metadata.
func (s suite) dedupAnswerNotStolen(t *testing.T) {
	w := s.newDedupWorld(t)
	meta, idKey, id := w.hello(t)
	res, err := w.victim.Act(t.Context(), "role:bank,cmd:token", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(res.Value()); !strings.Contains(got, "s3cr3t") {
		t.Fatalf("the victim's token = %s", got)
	}
	// The token call was the victim's next call after the spy's.
	for _, guess := range []uint64{id + 1, id + 2, id} {
		if got := w.attack(t, meta, idKey, guess); strings.Contains(got, "s3cr3t") {
			t.Fatalf("a forged ping with call id %d got the victim's answer %s", guess, got)
		}
	}
}

// dedupAnswerNotPlanted: answers the spy makes the bank store under the
// victim's next call ids never answer the victim's calls: every transfer
// runs.
func (s suite) dedupAnswerNotPlanted(t *testing.T) {
	w := s.newDedupWorld(t)
	meta, idKey, id := w.hello(t)
	const n = 8
	for i := range uint64(n) {
		w.attack(t, meta, idKey, id+1+i)
	}
	for i := range n {
		res, err := w.victim.Act(t.Context(), "role:bank,cmd:transfer", map[string]any{"amount": i + 1})
		if err != nil {
			t.Fatalf("transfer %d: %v", i, err)
		}
		if got := fmt.Sprint(res.Value()); !strings.Contains(got, "transferred") {
			t.Errorf("transfer %d answered %s", i, got)
		}
	}
	if got := w.transfers.Load(); got != n {
		t.Errorf("%d of %d transfers ran", got, n)
	}
}
