package tcp_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testpki"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/transporttest"
	"github.com/wizardmesh/wizard/runtime/tcp"
)

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
	if m.Pattern == runtime.CatalogPattern {
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

func newDedupWorld(t *testing.T) *dedupWorld {
	t.Helper()
	w := &dedupWorld{spy: &spy{}}
	w.bank = newServer(t)
	transporttest.MustAdd(t, w.bank, "role:bank,cmd:token", func(ctx context.Context, req runtime.Request) (any, error) {
		return map[string]any{"token": "s3cr3t"}, nil
	})
	transporttest.MustAdd(t, w.bank, "role:bank,cmd:transfer", func(ctx context.Context, req runtime.Request) (any, error) {
		w.transfers.Add(1)
		return map[string]any{"transferred": req.Get("amount")}, nil
	})
	transporttest.MustAdd(t, w.bank, "role:bank,cmd:ping", func(ctx context.Context, req runtime.Request) (any, error) {
		return map[string]any{"pong": true}, nil
	})
	tr := newTransport(t)
	l, err := tr.Listen("127.0.0.1:0", w.spy)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	w.victim = newClient(t, "role:bank,cmd:transfer", w.bank.Addr(), l.Addr())
	transporttest.WaitRoutable(t, w.victim, "role:spy,cmd:hello")
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

// TestDedupAnswerNotStolen: the spy cannot take the answer the bank
// stored for the victim's call, however it forges the call's metadata.
func TestDedupAnswerNotStolen(t *testing.T) {
	w := newDedupWorld(t)
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

// TestDedupAnswerNotPlanted: answers the spy makes the bank store under
// the victim's next call ids never answer the victim's calls: every
// transfer runs.
func TestDedupAnswerNotPlanted(t *testing.T) {
	w := newDedupWorld(t)
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

// TestDedupBoundToCertificate runs the suite's scenario over mutual TLS.
func TestDedupBoundToCertificate(t *testing.T) {
	p := testpki.New(t)
	transporttest.DedupBoundToIdentity(t,
		newTransport(t, tcp.WithServerTLS(p.MutualServerConfig())),
		newTransport(t, tcp.WithClientTLS(p.ClientCertConfig())),
		newTransport(t, tcp.WithClientTLS(p.OtherClientCertConfig())))
}
