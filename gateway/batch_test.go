package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/coder/websocket"
)

// countingConn counts the writes that reach the socket and, with gate
// set, holds each until gate gives it a turn (a client that does not
// read, as the socket sees it).
type countingConn struct {
	net.Conn
	writes atomic.Int64
	gate   chan struct{}
}

func (c *countingConn) Write(p []byte) (int, error) {
	if c.gate != nil {
		<-c.gate
	}
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// batchConn opens a WebSocket connection to tg and returns it with the
// gateway's side of it, whose socket writes go through a countingConn.
func batchConn(t *testing.T, tg *testGateway, gate chan struct{}) (*websocket.Conn, *wsConn, *countingConn) {
	t.Helper()
	c := dialWS(t, tg.ws, nil)
	c.SetReadLimit(-1)
	var wc *wsConn
	until(t, "the gateway's side of the connection", func() bool {
		tg.mu.Lock()
		defer tg.mu.Unlock()
		for w := range tg.conns {
			wc = w
		}
		return wc != nil
	})
	if wc.bw == nil {
		t.Fatal("the connection has no batchWriter: it was not hijacked through hijackWriter")
	}
	cc := &countingConn{Conn: wc.bw.c, gate: gate}
	wc.bw.mu.Lock()
	wc.bw.c = cc
	wc.bw.mu.Unlock()
	return c, wc, cc
}

func numbered(i, pad int) []byte {
	return []byte(`{"type":"msg","id":"s","body":{"i":` + strconv.Itoa(i) + `,"pad":"` + strings.Repeat("x", pad) + `"}}`)
}

// readNumbered reads n frames and checks they are numbered from first
// up, in order.
func readNumbered(t *testing.T, c *websocket.Conn, first, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), guard)
	defer cancel()
	for i := first; i < first+n; i++ {
		_, b, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if want := `{"type":"msg","id":"s","body":{"i":` + strconv.Itoa(i) + `,`; !strings.HasPrefix(string(b), want) {
			t.Fatalf("frame %d: %.80s, want %s…", i, b, want)
		}
	}
}

// TestWebSocketBatch: frames that wait together in a connection's queue
// go out in its order with one socket write per batch (wsBatchFrames
// frames, or wsBatchBytes give or take a frame), and a frame alone with
// one.
func TestWebSocketBatch(t *testing.T) {
	tg := newTestGateway(t, settings{ws: wsSettings{sendQueue: 1000}})
	c, wc, cc := batchConn(t, tg, nil)
	for _, tc := range []struct {
		frames, pad     int
		minWrt, maxWrts int64
	}{
		{1, 10, 1, 1},
		{16, 10, 1, 1},       // one batch
		{100, 10, 7, 7},      // batches of wsBatchFrames
		{100, 3000, 10, 13},  // some 300 KiB: batches of wsBatchBytes
		{3, 100 << 10, 3, 4}, // frames larger than a batch: one write each held, two the last, alone (the header from the 1 KiB buffer, then the payload)
	} {
		name := fmt.Sprintf("%d frames of %d bytes", tc.frames, tc.pad)
		cc.writes.Store(0)
		// All queued before the writer runs: the first push takes the
		// turn, which the test then runs.
		for i := range tc.frames {
			if write := wc.queue(numbered(i, tc.pad)); write != (i == 0) {
				t.Fatalf("%s: frame %d took the writer's turn: %v", name, i, write)
			}
		}
		wc.writeQueued()
		readNumbered(t, c, 0, tc.frames)
		if n := cc.writes.Load(); n < tc.minWrt || n > tc.maxWrts {
			t.Errorf("%s: %d socket writes, want %d to %d", name, n, tc.minWrt, tc.maxWrts)
		}
	}
}

// TestWebSocketBatchSlowClose: while a batch's write waits on a client
// that does not read, frames queued meanwhile count against the send
// queue as before; the full queue closes the connection (4008); the
// batch then goes out whole and in order, the frames still queued do
// not, and the close frame follows the batch.
func TestWebSocketBatchSlowClose(t *testing.T) {
	tg := newTestGateway(t, settings{ws: wsSettings{sendQueue: 4}})
	gate := make(chan struct{})
	c, wc, _ := batchConn(t, tg, gate)
	for i := range 3 {
		wc.queue(numbered(i, 10))
	}
	written := make(chan struct{})
	go func() {
		defer close(written)
		wc.writeQueued() // holds the 3 frames, then waits on the gate
	}()
	// The writer took the 3 (the queue is empty once it did), and its
	// write waits: 4 more fit, the fifth is a slow consumer.
	until(t, "the writer to take the batch", func() bool {
		wc.send.mu.Lock()
		defer wc.send.mu.Unlock()
		return len(wc.send.items) == wc.send.head
	})
	for i := 3; i < 7; i++ {
		wc.queue(numbered(i, 10))
		if wc.closed.Load() {
			t.Fatalf("closed after %d frames queued behind the batch, want 4", i-3)
		}
	}
	wc.queue(numbered(7, 10))
	if !wc.closed.Load() {
		t.Fatal("a full send queue behind a batch did not close the connection")
	}
	close(gate) // the client reads again
	<-written
	readNumbered(t, c, 0, 3)
	ctx, cancel := context.WithTimeout(t.Context(), guard)
	defer cancel()
	_, b, err := c.Read(ctx)
	if got := websocket.CloseStatus(err); got != closeSlowConsumer {
		t.Fatalf("after the batch: %.80s, %v (status %d); want close 4008", b, err, got)
	}
}

// TestWebSocketBatchStreamsWritten: a stream's frame in a batch is
// told written once the batch is: each stream gets its token.
func TestWebSocketBatchStreamsWritten(t *testing.T) {
	tg := newTestGateway(t, settings{ws: wsSettings{sendQueue: 100}})
	c, wc, cc := batchConn(t, tg, nil)
	const streams = wsBatchFrames
	tokens := make([]chan struct{}, streams)
	for i := range streams {
		tokens[i] = make(chan struct{}, 1)
		ok, write := wc.send.push(outMsg{b: numbered(i, 10), written: tokens[i]})
		if !ok || write != (i == 0) {
			t.Fatalf("push %d: ok %v write %v", i, ok, write)
		}
	}
	wc.writeQueued()
	for i, w := range tokens {
		select {
		case <-w:
		default:
			t.Errorf("stream %d was not told its frame was written", i)
		}
	}
	readNumbered(t, c, 0, streams)
	if n := cc.writes.Load(); n != 1 {
		t.Errorf("%d socket writes for %d streams' frames, want 1", n, streams)
	}
}

// TestStreamAheadOrder: streams whose frames are queued ahead of the
// socket (a send queue of 8, two streams a connection: two frames each
// at most) keep each stream's order, end after their messages, and
// never fill the send queue themselves (no slow consumer close), the
// client reading as it pleases.
func TestStreamAheadOrder(t *testing.T) {
	tg, _ := newStreamGateway(t, settings{ws: wsSettings{sendQueue: 8, maxStreams: 2}})
	if n := tg.now().set.ws.aheadFrames(); n != 2 {
		t.Fatalf("aheadFrames %d, want 2", n)
	}
	c := dialWS(t, tg.ws, nil)
	const n = 2000
	for _, id := range []string{"a", "b"} {
		sendFrame(t, c, map[string]any{"type": "req", "id": id, "method": "GET", "path": "/s/count?n=" + strconv.Itoa(n)})
	}
	next := map[string]int{}
	ended := 0
	for ended < 2 {
		f := readStreamFrame(t, c)
		id := *f.ID
		switch f.Type {
		case frameMsg:
			var m struct{ I int }
			if err := json.Unmarshal(f.Body, &m); err != nil || m.I != next[id] {
				t.Fatalf("stream %s: message %s, want i %d", id, f.Body, next[id])
			}
			next[id]++
		case frameEnd:
			if f.Status != 200 || next[id] != n {
				t.Fatalf("stream %s ended %d after %d messages, want 200 after %d", id, f.Status, next[id], n)
			}
			ended++
		default:
			t.Fatalf("frame %s", f.Type)
		}
	}
	if l := tg.logs.find("slow consumer"); len(l) > 0 {
		t.Errorf("streams alone made a slow consumer: %v", l)
	}
}
