package transporttest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/wizardmesh/wizard/internal/testkit/need"
	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
	"github.com/wizardmesh/wizard/runtime/internal/wire"
)

// RawConn is a connection (for QUIC, a stream of its own connection) a
// test writes frames to, before the wizard handshake. Close closes the
// whole connection.
type RawConn interface {
	io.ReadWriteCloser
	SetReadDeadline(time.Time) error
}

// DialFrom opens a RawConn to addr from the local IP from.
type DialFrom func(ctx context.Context, addr, from string) (RawConn, error)

// The sources of [Admission]: heavySources IPs with Max/heavySources
// connections each, an IP of one connection per eighth of Max, and the new
// caller's IP after them, all 127.0.0.x from 127.0.0.2 on.
const (
	heavySources   = 5
	firstSource    = 2
	admissionCalls = 50
)

// Admission fills srv's listener, whose WithMaxConns is max (above 64, so
// that no search for a connection to close looks at all of them; its
// WithMaxConnsPerIP the default), with connections that stay active:
// five IPs holding a fifth of max each, then one connection from each of
// max/8 more IPs. Then a new caller (newCaller's, [RawCaller]'s when nil),
// from an IP of its own, makes admissionCalls calls to role:fair,cmd:ping,
// one at a time; Admission returns how many were answered. busy says how
// the others stay active: each with a cheap call before every connection
// the new caller opens (false), or each with one call in flight that
// never ends (true).
func Admission(t *testing.T, srv *runtime.Node, dial DialFrom, max int, busy bool, newCaller NewCaller) (served int) {
	t.Helper()
	light := max / 8
	newcomer := ip(firstSource + heavySources + light)
	if pc, err := net.ListenPacket("udp", newcomer+":0"); err != nil {
		need.Skipf(t, "needs the loopback addresses 127.0.0.%d to %s to dial from (Linux routes 127/8 to lo): %v", firstSource, newcomer, err)
	} else {
		pc.Close()
	}
	started, release := make(chan struct{}, max), make(chan struct{})
	t.Cleanup(func() { close(release) })
	MustAdd(t, srv, "role:fair,cmd:ping", func(ctx context.Context, r runtime.Request) (any, error) { return "pong", nil })
	MustAdd(t, srv, "role:fair,cmd:slow", func(ctx context.Context, r runtime.Request) (any, error) {
		started <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
		}
		return "done", nil
	})

	var fill []*rawCaller
	for range max / heavySources {
		for i := range heavySources {
			fill = append(fill, open(t, dial, srv.Addr(), ip(firstSource+i)))
		}
	}
	for i := range light {
		fill = append(fill, open(t, dial, srv.Addr(), ip(firstSource+heavySources+i)))
	}
	fill = round(fill, "cmd:ping,role:fair") // those the listener kept
	if len(fill) != max {
		t.Fatalf("%d connections served after the fill, want the listener full (%d)", len(fill), max)
	}
	if busy {
		for _, c := range fill {
			c.send(1<<40, "cmd:slow,role:fair")
		}
		for range fill {
			testwait.Recv(t, started)
		}
	}

	full := &active{fill: fill}
	before := func() {}
	if !busy {
		before = full.round
	}
	if newCaller == nil {
		newCaller = RawCaller(dial)
	}
	call := newCaller(t, srv.Addr(), newcomer, before)
	for range admissionCalls {
		if call() {
			served++
		}
	}
	if !busy {
		full.round()
		checkGaveWay(t, fill, full.fill)
	}
	return served
}

// active is the connections that fill the listener, those still served.
type active struct {
	mu   sync.Mutex
	fill []*rawCaller
}

// round has each connection make a cheap call, and keeps those answered.
func (a *active) round() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.fill = round(a.fill, "cmd:ping,role:fair")
}

// checkGaveWay checks that of the connections full, those left are all
// but one, of one of the heavy IPs.
func checkGaveWay(t *testing.T, full, left []*rawCaller) {
	t.Helper()
	kept := map[*rawCaller]bool{}
	for _, c := range left {
		kept[c] = true
	}
	var lost []string
	for _, c := range full {
		if !kept[c] {
			lost = append(lost, c.from)
		}
	}
	heavy := func(from string) bool {
		for i := range heavySources {
			if from == ip(firstSource+i) {
				return true
			}
		}
		return false
	}
	if len(lost) != 1 || !heavy(lost[0]) {
		t.Errorf("connections closed for the new caller: from %v, want one from an IP with the most", lost)
	}
}

// NewCaller starts a caller of the node at addr from the local IP from,
// which calls beforeDial before it opens a connection, and returns its
// call: it calls role:fair,cmd:ping and reports whether it was answered.
type NewCaller func(t *testing.T, addr, from string, beforeDial func()) (call func() bool)

// RawCaller returns the NewCaller that calls over its connection, and
// opens one first when it has none (the last one was refused or closed).
func RawCaller(dial DialFrom) NewCaller {
	return func(t *testing.T, addr, from string, beforeDial func()) func() bool {
		var c *rawCaller // open has t close it
		id := uint64(0)
		return func() bool {
			if c == nil {
				beforeDial()
				c = open(t, dial, addr, from)
			}
			id++
			ok := c.call(id, "cmd:ping,role:fair")
			if c.err != nil {
				c.close()
				c = nil
			}
			return ok
		}
	}
}

// ip returns 127.0.0.i.
func ip(i int) string { return fmt.Sprintf("127.0.0.%d", i) }

// rawCaller makes calls over a RawConn; every error is its connection's
// end, not the test's.
type rawCaller struct {
	from string
	conn RawConn
	br   *bufio.Reader
	err  error // the first error; then every call fails
}

// open dials addr from the IP from and shakes hands; a refused connection
// (for QUIC, refused before the dial returns) is returned failed.
func open(t *testing.T, dial DialFrom, addr, from string) *rawCaller {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), testwait.Guard)
	defer cancel()
	c := &rawCaller{from: from}
	if c.conn, c.err = dial(ctx, addr, from); c.err != nil {
		return c
	}
	t.Cleanup(c.close)
	c.br = bufio.NewReader(c.conn)
	if _, c.err = c.conn.Write([]byte(wire.Magic + "\x01\x00\x00\x00")); c.err == nil {
		c.conn.SetReadDeadline(time.Now().Add(testwait.Guard))
		c.err = wire.ReadHandshake(c.br)
	}
	return c
}

// close closes c's connection, if it has one.
func (c *rawCaller) close() {
	if c.conn != nil {
		c.conn.Close()
	}
}

// send writes a request for pattern with id.
func (c *rawCaller) send(id uint64, pattern string) {
	if c.err != nil {
		return
	}
	f := &wire.Frame{Type: wire.TypeRequest, ID: id, Pattern: pattern, Codec: wire.CodecJSON, Payload: []byte("{}")}
	_, c.err = c.conn.Write(wire.AppendFrame(nil, f))
}

// call makes the call id to pattern and reports whether it was answered.
func (c *rawCaller) call(id uint64, pattern string) bool {
	c.send(id, pattern)
	if c.err != nil {
		return false
	}
	c.conn.SetReadDeadline(time.Now().Add(testwait.Guard))
	for c.err == nil {
		var f wire.Frame
		if _, c.err = wire.ReadFrame(c.br, 0, &f, nil); c.err == nil && f.Type == wire.TypeResponse && f.ID == id {
			return true
		}
	}
	return false
}

// round has every caller of cs make a cheap call, at once, and returns
// those answered.
func round(cs []*rawCaller, pattern string) []*rawCaller {
	ok := make([]bool, len(cs))
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Go(func() { ok[i] = c.call(1, pattern) })
	}
	wg.Wait()
	var kept []*rawCaller
	for i, c := range cs {
		if ok[i] {
			kept = append(kept, c)
		}
	}
	return kept
}
