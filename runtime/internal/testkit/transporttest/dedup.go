package transporttest

import (
	"context"
	"encoding/binary"
	"sync/atomic"
	"testing"

	"github.com/wizardmesh/wizard/runtime"
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
			Meta:    []runtime.MetaPair{{Key: "c", Value: "victim"}, {Key: "i", Value: string(id[:])}, {Key: "k", Value: "0123456789abcdef"}},
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
