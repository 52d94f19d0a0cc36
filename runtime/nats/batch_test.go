package nats_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/natstest"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testlog"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/transporttest"
	"github.com/wizardmesh/wizard/runtime/internal/wire"
	"github.com/wizardmesh/wizard/runtime/nats"
)

// rawFrames reads the frames of a message's data, failing t on a
// malformed one.
func rawFrames(t *testing.T, data []byte) []wire.Frame {
	t.Helper()
	var fs []wire.Frame
	for len(data) > 0 {
		if len(data) < 4 || int(binary.BigEndian.Uint32(data)) > len(data)-4 {
			t.Fatalf("a malformed message: %x", data)
		}
		n := 4 + int(binary.BigEndian.Uint32(data))
		var f wire.Frame
		if err := wire.DecodeFrame(data[4:n], &f); err != nil {
			t.Fatal(err)
		}
		fs = append(fs, f)
		data = data[n:]
	}
	return fs
}

// echoRequest is a request frame for role:echo, numbered id.
func echoRequest(id uint64) []byte {
	return wire.AppendFrame(nil, &wire.Frame{Type: wire.TypeRequest, Codec: wire.CodecJSON, ID: id, Pattern: "role:echo", Payload: []byte("{}"), Deadline: 10 * time.Second})
}

// TestBatchServed: a node serves the calls of a message that holds
// several frames, each named by its id, and answers each with its id to
// the message's reply subject; a single frame of the old form (id 0,
// named by its own reply subject) is still served and answered alone.
func TestBatchServed(t *testing.T) {
	b := natstest.Start(t)
	srv := transporttest.NewServer(t, newTransport(t, b.URL()))
	transporttest.MustAdd(t, srv, "role:echo", func(ctx context.Context, r runtime.Request) (any, error) { return "ok", nil })

	raw, err := natsgo.Connect(b.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	inbox := raw.NewInbox()
	replies, err := raw.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	var batch []byte
	for id := uint64(5); id <= 7; id++ {
		batch = append(batch, echoRequest(id)...)
	}
	if err := raw.PublishRequest(srv.Addr(), inbox, batch); err != nil {
		t.Fatal(err)
	}
	got := map[uint64]bool{}
	for len(got) < 3 {
		m, err := replies.NextMsg(10 * time.Second)
		if err != nil {
			t.Fatalf("replies %v of 5, 6, 7: %v", got, err)
		}
		for _, f := range rawFrames(t, m.Data) {
			if f.Type != wire.TypeResponse || string(f.Payload) != `"ok"` || got[f.ID] || f.ID < 5 || f.ID > 7 {
				t.Fatalf("a %v frame, id %d, payload %q; already got %v", f.Type, f.ID, f.Payload, got)
			}
			got[f.ID] = true
		}
	}

	m, err := raw.Request(srv.Addr(), echoRequest(0), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if fs := rawFrames(t, m.Data); len(fs) != 1 || fs[0].Type != wire.TypeResponse || fs[0].ID != 0 || string(fs[0].Payload) != `"ok"` {
		t.Fatalf("reply to a single frame: %+v", fs)
	}
}

// TestMalformedBatchDropped: a message whose frames are good but for one
// (at the end, or past the bound on frames) is dropped whole, with a log
// record: none of its calls runs, and the node serves on.
func TestMalformedBatchDropped(t *testing.T) {
	b := natstest.Start(t)
	var log testlog.Buffer
	srv := transporttest.NewServer(t, newTransport(t, b.URL(), nats.WithLogger(log.Logger())))
	var runs atomic.Int64
	transporttest.MustAdd(t, srv, "role:echo", func(ctx context.Context, r runtime.Request) (any, error) {
		runs.Add(1)
		return "ok", nil
	})
	raw, err := natsgo.Connect(b.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	inbox := raw.NewInbox()
	trailing := append(append(echoRequest(1), echoRequest(2)...), 0, 0, 0, 9, 1)
	var tooMany []byte
	for id := range uint64(65) {
		tooMany = append(tooMany, echoRequest(id+1)...)
	}
	for _, bad := range [][]byte{trailing, tooMany} {
		if err := raw.PublishRequest(srv.Addr(), inbox, bad); err != nil {
			t.Fatal(err)
		}
	}
	// Messages on one subject from one connection arrive in order: this
	// call is served after the bad batches were taken.
	if _, err := raw.Request(srv.Addr(), echoRequest(0), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("%d calls ran; want 1, the good one after the bad batches", n)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(log.String(), "malformed message dropped"); n != 2 {
		t.Fatalf("%d records of a malformed message; want 2:\n%s", n, log.String())
	}
}

// TestCallerToNodeWithoutBatches: to a node whose pong does not say it
// reads batches (an older one), a caller sends every call alone, in the
// single-frame form, however many are in flight at once.
func TestCallerToNodeWithoutBatches(t *testing.T) {
	b := natstest.Start(t)
	raw, err := natsgo.Connect(b.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	const subject = "old.node"
	var mu sync.Mutex
	var wrong []string
	_, err = raw.Subscribe(subject, func(m *natsgo.Msg) {
		var f wire.Frame
		if len(m.Data) < 4 || int(binary.BigEndian.Uint32(m.Data)) != len(m.Data)-4 || wire.DecodeFrame(m.Data[4:], &f) != nil || f.ID != 0 {
			mu.Lock()
			wrong = append(wrong, fmt.Sprintf("%x", m.Data))
			mu.Unlock()
			return
		}
		switch f.Type {
		case wire.TypePing:
			_ = m.Respond(wire.AppendFrame(nil, &wire.Frame{Type: wire.TypePong}))
		case wire.TypeRequest:
			_ = m.Respond(wire.AppendFrame(nil, &wire.Frame{Type: wire.TypeResponse, Payload: f.Payload}))
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := raw.Flush(); err != nil {
		t.Fatal(err)
	}
	tr := newTransport(t, b.URL())
	c, err := tr.Dial(t.Context(), subject)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Go(func() {
			for j := range 8 {
				want := fmt.Sprint(i, ".", j)
				r, err := c.Call(t.Context(), &runtime.Message{Pattern: "role:echo", Payload: []byte(want)})
				if err != nil || string(r.Payload) != want {
					t.Errorf("call %s: %v, %v", want, r, err)
					return
				}
			}
		})
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(wrong) > 0 {
		t.Fatalf("%d messages not of the single-frame form, the first %s", len(wrong), wrong[0])
	}
}

// TestCancelInTheRequestsBatch: a cancel in the same message as its
// request, right behind it, cancels the call however soon it comes after
// the request (usually before the call's worker has made its ctx): the
// handler, if it started at all, sees its ctx cancelled, and the reply
// is a cancelled error.
func TestCancelInTheRequestsBatch(t *testing.T) {
	b := natstest.Start(t)
	srv := transporttest.NewServer(t, newTransport(t, b.URL()))
	ended := make(chan error, 1)
	transporttest.MustAdd(t, srv, "role:block", func(ctx context.Context, r runtime.Request) (any, error) {
		select {
		case <-ctx.Done():
		case <-time.After(testwait.Guard):
		}
		ended <- ctx.Err()
		return nil, ctx.Err()
	})
	raw, err := natsgo.Connect(b.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	inbox := raw.NewInbox()
	replies, err := raw.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	data := wire.AppendFrame(nil, &wire.Frame{Type: wire.TypeRequest, Codec: wire.CodecJSON, ID: 9, Pattern: "role:block", Payload: []byte("{}"), Deadline: time.Hour})
	data = wire.AppendFrame(data, &wire.Frame{Type: wire.TypeCancel, ID: 9})
	if err := raw.PublishRequest(srv.Addr(), inbox, data); err != nil {
		t.Fatal(err)
	}
	m, err := replies.NextMsg(testwait.Guard)
	if err != nil {
		t.Fatal(err)
	}
	fs := rawFrames(t, m.Data)
	if len(fs) != 1 || fs[0].ID != 9 || fs[0].Type != wire.TypeError {
		t.Fatalf("reply %+v; want one error frame for call 9", fs)
	}
	if code, msg, err := wire.DecodeError(fs[0].Payload); err != nil || runtime.Code(code) != runtime.CodeCanceled {
		t.Fatalf("reply: code %v %q (%v); want %v", runtime.Code(code), msg, err, runtime.CodeCanceled)
	}
	select {
	case err := <-ended:
		if err != context.Canceled {
			t.Fatalf("the handler's ctx ended with %v", err)
		}
	default: // the call was cancelled before its handler started
	}
}
