package microwizard

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/bridge"
	"github.com/wizardmesh/wizard/runtime/introspect"
	"github.com/wizardmesh/wizard/runtime/pattern"
)

// conn calls one MicroWizard node: one reader goroutine matches answers
// to the pending calls by id; one keep-alive goroutine pings a silent
// connection.
type conn struct {
	t     *Transport
	addr  string
	where string
	c     net.Conn
	w     *lineWriter
	seq   atomic.Uint64
	read  atomic.Int64 // when the last line was read, in UnixNano

	mu      sync.Mutex
	pending map[string]chan *runtime.Message
	err     error // why the connection ended, once it has

	done      chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup
}

var _ runtime.Conn = (*conn)(nil)

func newConn(t *Transport, addr string, c net.Conn) *conn {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	cn := &conn{t: t, addr: addr, where: "wizard: microwizard: " + addr, c: c, w: newLineWriter(c),
		pending: map[string]chan *runtime.Message{}, done: make(chan struct{})}
	cn.read.Store(time.Now().UnixNano())
	cn.wg.Add(1)
	go cn.readLoop()
	if !t.seneca {
		// Seneca has no keep-alive: it would take the ping for a request
		// of no kind and answer nothing.
		cn.wg.Add(1)
		go cn.keepAlive()
	}
	return cn
}

func (c *conn) Done() <-chan struct{} { return c.done }

// Close ends the connection; pending calls fail as lost.
func (c *conn) Close() error {
	c.end(net.ErrClosed)
	c.wg.Wait()
	return nil
}

// end closes the connection for the reason err, once.
func (c *conn) end(err error) {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.err = err
		c.mu.Unlock()
		close(c.done)
		c.c.Close()
	})
}

// Call sends m as act or actE and waits for the answer. The catalog pull
// is answered here, with the pins given for the address ([WithPeer]).
func (c *conn) Call(ctx context.Context, m *runtime.Message) (*runtime.Message, error) {
	switch m.Pattern {
	case introspect.CatalogPattern:
		return c.catalog()
	case introspect.HealthPattern:
		return &runtime.Message{Code: runtime.CodeUnimplemented, Error: "wizard: microwizard: MicroWizard nodes have no health pattern"}, nil
	}
	select {
	case <-c.done:
		return nil, bridge.NotSent(c.where, c.cause())
	default:
	}
	out, err := requestLine(m)
	if err != nil {
		return nil, runtime.Errorf(runtime.CodeInvalidArgument, "wizard: microwizard: call %s: %v", m.Pattern, err)
	}
	out.ID = strconv.FormatUint(c.seq.Add(1), 36)
	if c.t.seneca {
		out = senecaLine(c.t.senecaID, outgoingTrack(ctx, c.t.senecaID), out)
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, runtime.Errorf(runtime.CodeInvalidArgument, "wizard: microwizard: call %s: %v", m.Pattern, err)
	}
	if len(b) > c.t.maxLine {
		return nil, runtime.Errorf(runtime.CodeResourceExhausted, "wizard: microwizard: call %s: %d bytes, longer than the line bound %d", m.Pattern, len(b), c.t.maxLine)
	}
	if err := checkIntegers(b); err != nil {
		return nil, runtime.Errorf(runtime.CodeOutOfRange, "wizard: microwizard: call %s: %v", m.Pattern, err)
	}
	if m.Flags&runtime.FlagNoReply != 0 {
		if err := c.w.write(b); err != nil {
			c.end(err)
			return nil, bridge.Lost(c.where, err)
		}
		return nil, nil
	}
	ch := make(chan *runtime.Message, 1)
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return nil, bridge.NotSent(c.where, c.cause())
	}
	if len(c.pending) >= c.t.maxPending {
		c.mu.Unlock()
		return nil, bridge.NotSent(c.where, fmt.Errorf("%d calls waiting for an answer, the bound", c.t.maxPending))
	}
	c.pending[out.ID] = ch
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.pending, out.ID)
		c.mu.Unlock()
	}()
	if err := c.w.write(b); err != nil {
		c.end(err)
		return nil, bridge.Lost(c.where, err)
	}
	select {
	case r := <-ch:
		return r, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.done:
		return nil, bridge.Lost(c.where, c.cause())
	}
}

func (c *conn) cause() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		return net.ErrClosed
	}
	return c.err
}

// catalog states the pins of c's address as its catalog.
func (c *conn) catalog() (*runtime.Message, error) { return pinCatalog(c.t, c.addr) }

// pinCatalog states the pins given for addr as its catalog.
func pinCatalog(t *Transport, addr string) (*runtime.Message, error) {
	b, err := json.Marshal(struct {
		ID       string   `json:"id"`
		Patterns []string `json:"patterns"`
	}{t.Name() + "@" + addr, append([]string{}, t.peers[addr]...)})
	if err != nil {
		return nil, err
	}
	return &runtime.Message{Codec: runtime.CodecJSON, Payload: b}, nil
}

// requestLine is the MicroWizard request for m, a call to the pin
// m.Pattern: actE with p the pin, d the data; under a glob pin, p is the
// pattern the ActE was made with (the ":p" metadata) when it has no glob;
// else act, when the pin has a glob (MicroWizard routes by the message's
// values then) or m is an Act with a protobuf message (overlaid with the
// pattern of the ":o" metadata).
func requestLine(m *runtime.Message) (line, error) {
	l := line{}
	if m.Flags&runtime.FlagNoReply != 0 {
		f := false
		l.Sync = &f
	} else {
		t := true
		l.Sync = &t
	}
	data, err := jsonOf(m.Codec, m.Payload, metaValue(m.Meta, ":t"))
	if err != nil {
		return l, err
	}
	pin, err := pattern.Parse(m.Pattern)
	if err != nil {
		return l, err
	}
	over := metaValue(m.Meta, ":o")
	if c := metaValue(m.Meta, ":p"); over == "" && pin.HasGlob() && c != "" {
		// An ActE to a glob pin names the pattern it was made with: sent
		// as p, as MicroWizard's client sends an actE under a glob pin.
		if cp, err := pattern.Parse(c); err == nil && !cp.HasGlob() {
			pin = cp
		}
	}
	if over == "" && !pin.HasGlob() {
		l.K, l.P, l.D = kindActE, mwPattern(pin), data
		if l.D == nil {
			l.D = json.RawMessage("{}")
		}
		return l, nil
	}
	o := map[string]any{}
	if len(data) > 0 {
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		if dec.Decode(&o) != nil || o == nil {
			return l, errors.New("a call to a pin with a glob needs a JSON object to route by")
		}
	}
	if over != "" {
		op, err := pattern.Parse(over)
		if err != nil {
			return l, err
		}
		for _, p := range op.Pairs() {
			o[p.Key] = p.Value
		}
	}
	for _, p := range pin.Pairs() {
		_, ok := o[p.Key]
		if !ok && !strings.ContainsAny(p.Value, "*?") {
			o[p.Key], ok = p.Value, true
		}
		if !ok {
			return l, fmt.Errorf("the pin %s has a glob for %q, which the message lacks: MicroWizard routes by the message's values (use Act, or a pin without globs)", pin, p.Key)
		}
	}
	args, err := json.Marshal(o)
	if err != nil {
		return l, err
	}
	l.K, l.Args = kindAct, args
	return l, nil
}

// mwPattern writes p as MicroWizard's pattern strings are: key:value
// joined by commas, unquoted (its parser takes a value up to the next
// comma).
func mwPattern(p pattern.Pattern) string {
	var b strings.Builder
	for i, pr := range p.Pairs() {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(pr.Key)
		b.WriteByte(':')
		b.WriteString(pr.Value)
	}
	return b.String()
}

// readLoop reads answers and hands them to their calls.
func (c *conn) readLoop() {
	defer c.wg.Done()
	r := bufio.NewReaderSize(c.c, readChunk)
	var buf []byte
	for {
		b, nb, err := readLine(r, c.t.maxLine, buf)
		buf = nb
		if errors.Is(err, errLineTooLong) {
			c.read.Store(time.Now().UnixNano())
			c.answerLong(headLine(b), err)
			continue
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				c.t.log.Warn("wizard: microwizard: connection ended", "addr", c.addr, "err", err)
			}
			c.end(err)
			return
		}
		c.read.Store(time.Now().UnixNano())
		if len(b) == 0 {
			continue
		}
		in, err := decodeLine(b)
		if err != nil {
			c.t.log.Warn("wizard: microwizard: a line that is not a JSON object ends the connection", "addr", c.addr, "err", err)
			c.end(err)
			return
		}
		switch {
		case in.H == 2:
			continue
		case in.H == 1:
			c.w.write([]byte(`{"h":2}`))
			continue
		case in.K != kindRes && in.Kind != kindRes:
			c.t.log.Debug("wizard: microwizard: a line of unknown kind ignored", "addr", c.addr, "k", in.K)
			continue
		}
		c.mu.Lock()
		ch := c.pending[in.ID]
		delete(c.pending, in.ID)
		c.mu.Unlock()
		if ch != nil {
			ch <- replyMessage(in)
		}
	}
}

// answerLong fails the call whose answer was over the line bound (its
// head read into in) with err; the connection goes on.
func (c *conn) answerLong(in line, err error) {
	c.t.log.Warn("wizard: microwizard: an answer over the line bound dropped", "addr", c.addr, "id", in.ID, "err", err)
	c.mu.Lock()
	ch := c.pending[in.ID]
	delete(c.pending, in.ID)
	c.mu.Unlock()
	if ch != nil {
		ch <- &runtime.Message{Code: runtime.CodeResourceExhausted, Error: c.where + ": " + err.Error()}
	}
}

// replyMessage is the reply of a MicroWizard answer.
func replyMessage(in line) *runtime.Message {
	if in.Error != nil {
		return fromLineError(in.Error)
	}
	if len(in.Res) == 0 || string(in.Res) == "null" {
		return &runtime.Message{}
	}
	return &runtime.Message{Codec: runtime.CodecJSON, Payload: append([]byte(nil), in.Res...)}
}

// keepAlive pings the node when nothing was read for the keep-alive
// interval, and ends the connection when the answer does not come in
// time, as MicroWizard's client does.
func (c *conn) keepAlive() {
	defer c.wg.Done()
	t := time.NewTimer(c.t.keepAlive)
	defer t.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-t.C:
		}
		idle := time.Since(time.Unix(0, c.read.Load()))
		if idle < c.t.keepAlive {
			t.Reset(c.t.keepAlive - idle)
			continue
		}
		sent := time.Now().UnixNano()
		if err := c.w.write([]byte(`{"h":1}`)); err != nil {
			c.end(err)
			return
		}
		t.Reset(c.t.keepAliveTimeout)
		select {
		case <-c.done:
			return
		case <-t.C:
		}
		if c.read.Load() < sent {
			c.t.log.Warn("wizard: microwizard: no answer to the keep-alive ping", "addr", c.addr, "timeout", c.t.keepAliveTimeout)
			c.end(errors.New("no answer to the keep-alive ping"))
			return
		}
		t.Reset(c.t.keepAlive)
	}
}

// senecaLine is the Seneca request for the MicroWizard request l: always
// an act of the whole message (Seneca routes by its values), which
// requestLine makes for a call that would go as actE. id is this node's
// instance id, track the call's ([outgoingTrack]).
func senecaLine(id string, track []string, l line) line {
	act := l.Args
	if l.K == kindActE {
		act = actOf(l.P, l.D)
	}
	return line{ID: l.ID + "/" + l.ID, Kind: "act", Origin: id, Track: track,
		Time: &senecaTime{ClientSent: time.Now().UnixMilli()}, Act: act, Sync: l.Sync}
}

// actOf is the act of an actE: d (an object, or none) with the pairs of
// the pattern p (in MicroWizard's form, as mwPattern writes it) set.
func actOf(p string, d json.RawMessage) json.RawMessage {
	o := map[string]any{}
	if len(d) > 0 {
		dec := json.NewDecoder(bytes.NewReader(d))
		dec.UseNumber()
		if dec.Decode(&o) != nil || o == nil {
			o = map[string]any{}
		}
	}
	for kv := range strings.SplitSeq(p, ",") {
		if k, v, ok := strings.Cut(kv, ":"); ok {
			o[k] = v
		}
	}
	b, _ := json.Marshal(o)
	return b
}
