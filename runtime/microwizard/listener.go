package microwizard

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/introspect"
	"github.com/wizardmesh/wizard/runtime/pattern"
)

// listener serves MicroWizard clients: each connection is read by one
// goroutine, and each request runs on a goroutine of its own, at most
// maxPending per connection (at the bound the connection is not read).
type listener struct {
	t      *Transport
	ln     net.Listener
	s      runtime.Server
	ctx    context.Context // cancelled by Close: ends running handlers
	cancel context.CancelFunc

	draining atomic.Bool    // Shutdown began: new requests are refused
	serving  sync.WaitGroup // requests being served
	conns    sync.WaitGroup // connection goroutines and the accept loop
	workers  sync.WaitGroup // the connections' workers

	mu     sync.Mutex
	open   map[net.Conn]struct{}
	closed bool
}

var _ runtime.Listener = (*listener)(nil)

func newListener(t *Transport, ln net.Listener, s runtime.Server) *listener {
	l := &listener{t: t, ln: ln, s: s, open: map[net.Conn]struct{}{}}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	l.conns.Add(1)
	go l.accept()
	return l
}

func (l *listener) Addr() string { return l.ln.Addr().String() }

func (l *listener) accept() {
	defer l.conns.Done()
	for {
		c, err := l.ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return
		}
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			c.Close()
			return
		}
		l.open[c] = struct{}{}
		l.conns.Add(1)
		l.mu.Unlock()
		go l.serveConn(c)
	}
}

// serveConn reads c's lines until it ends or sends a line the protocol
// does not allow: a line that is not a JSON object ends the connection,
// as MicroWizard's parser does, and so does a line over the bound.
func (l *listener) serveConn(c net.Conn) {
	defer l.conns.Done()
	defer func() {
		l.mu.Lock()
		delete(l.open, c)
		l.mu.Unlock()
		c.Close()
	}()
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	w := newLineWriter(c)
	remote := runtime.NewRemote("microwizard", c.RemoteAddr().String(), nil)
	r := bufio.NewReaderSize(c, readChunk)
	ws := &workers{l: l, w: w, remote: remote, work: make(chan line), max: l.t.maxPending}
	defer close(ws.work) // the workers end
	var buf []byte
	for {
		b, nb, err := readLine(r, l.t.maxLine, buf)
		buf = nb
		if errors.Is(err, errLineTooLong) {
			l.refuseLong(w, c, headLine(b), err)
			continue
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				l.t.log.Warn("wizard: microwizard: connection ended", "remote", c.RemoteAddr().String(), "err", err)
			}
			return
		}
		if len(b) == 0 {
			continue // ndjson skips empty lines
		}
		in, err := decodeLine(b)
		if err != nil {
			l.t.log.Warn("wizard: microwizard: a line that is not a JSON object ends the connection", "remote", c.RemoteAddr().String(), "err", err)
			return
		}
		switch {
		case l.t.seneca:
			if !l.senecaRequest(c, &in) {
				continue
			}
		case in.H == 1:
			if w.write([]byte(`{"h":2}`)) != nil {
				return
			}
			continue
		case in.K != kindAct && in.K != kindActE:
			// MicroWizard answers nothing to an unknown kind.
			l.t.log.Debug("wizard: microwizard: a line of unknown kind ignored", "remote", c.RemoteAddr().String(), "k", in.K)
			continue
		}
		l.serving.Add(1)
		if !ws.give(in) {
			l.serving.Done()
			return
		}
	}
}

// workers serve one connection's requests: up to max goroutines, started
// as needed and kept until the connection ends (a goroutine per request
// grew a new stack for each).
type workers struct {
	l      *listener
	w      *lineWriter
	remote *runtime.Remote
	work   chan line
	n, max int
}

// give hands in to an idle worker, or to a new one while there are fewer
// than max, else waits for one (the connection is not read meanwhile). It
// returns false when the listener closed.
func (ws *workers) give(in line) bool {
	select {
	case ws.work <- in:
		return true
	default:
	}
	if ws.n < ws.max {
		ws.n++
		ws.l.workers.Add(1)
		go ws.run()
	}
	select {
	case ws.work <- in:
		return true
	case <-ws.l.ctx.Done():
		return false
	}
}

func (ws *workers) run() {
	defer ws.l.workers.Done()
	for in := range ws.work {
		ws.l.serve(ws.w, ws.remote, in)
		ws.l.serving.Done()
	}
}

// senecaRequest checks a Seneca request as seneca-transport does, and
// makes it an act. A request of another kind, without an id, or whose
// track holds this node's id (it looped back) is not served; Seneca's
// answer to those has no sync, so over TCP it writes none: neither does
// this.
func (l *listener) senecaRequest(c net.Conn, in *line) bool {
	why := ""
	switch {
	case in.Kind != "act":
		why = "invalid_kind_act"
	case in.ID == "":
		why = "no_message_id"
	case slices.Contains(in.Track, l.t.senecaID):
		why = "message_loop"
	}
	if why != "" {
		l.t.log.Warn("wizard: seneca: a request refused", "remote", c.RemoteAddr().String(), "why", why, "kind", in.Kind)
		return false
	}
	in.K, in.Args = kindAct, in.Act
	return true
}

// refuseLong answers the call whose line was over the bound (its head
// read into in) with the error err, named RangeError as JavaScript names
// a length it cannot take; the connection goes on. A line that names no
// call, or asks for no answer, is dropped.
func (l *listener) refuseLong(w *lineWriter, c net.Conn, in line, err error) {
	l.t.log.Warn("wizard: microwizard: a line over the bound dropped", "remote", c.RemoteAddr().String(), "id", in.ID, "err", err)
	request := in.K == kindAct || in.K == kindActE || l.t.seneca && in.Kind == "act"
	if in.ID == "" || !request || !in.sync() {
		return
	}
	out := l.answerLine(in)
	out.Error = &lineError{Message: "wizard: microwizard: " + err.Error(), Name: "RangeError", Code: runtime.CodeResourceExhausted.String()}
	l.write(w, out)
}

// answerLine is the answer to in, still without its result or error.
func (l *listener) answerLine(in line) line {
	if !l.t.seneca {
		return line{ID: in.ID, K: kindRes, Sync: in.Sync}
	}
	out := line{ID: in.ID, Kind: kindRes, Sync: in.Sync, Origin: in.Origin, Accept: l.t.senecaID, Track: in.Track,
		Time: &senecaTime{ListenRecv: time.Now().UnixMilli()}}
	if in.Time != nil {
		out.Time.ClientSent = in.Time.ClientSent
	}
	return out
}

// serve runs one request and writes its answer, unless it asked for none.
func (l *listener) serve(w *lineWriter, remote *runtime.Remote, in line) {
	out := l.answerLine(in)
	m, err := requestMessage(in, l.s)
	switch {
	case err != nil:
		out.Error = &lineError{Message: "wizard: microwizard: " + err.Error(), Name: "Error", Code: runtime.CodeInvalidArgument.String()}
	case l.draining.Load():
		out.Error = &lineError{Message: overloadMessage, Name: "Error", Code: runtime.CodeUnavailable.String()}
	default:
		m.Remote, m.Deadline = remote, l.t.serveTimeout
		ctx, cancel := context.WithTimeout(withTrack(l.ctx, in.Track), l.t.serveTimeout)
		reply := l.s.ServeMessage(ctx, m)
		cancel()
		if !in.sync() || reply == nil {
			return
		}
		answer(&out, reply)
	}
	if !in.sync() {
		return
	}
	l.write(w, out)
}

// write writes the answer out; one over the line bound becomes its
// error.
func (l *listener) write(w *lineWriter, out line) {
	if out.Time != nil {
		out.Time.ListenSent = time.Now().UnixMilli()
	}
	b, err := json.Marshal(out)
	if err != nil {
		return
	}
	if len(b) > l.t.maxLine {
		out.Res = nil
		out.Error = &lineError{Message: fmt.Sprintf("wizard: microwizard: an answer of %d bytes, longer than the line bound of %d bytes (WithMaxLine)", len(b), l.t.maxLine), Name: "RangeError", Code: runtime.CodeResourceExhausted.String()}
		b, _ = json.Marshal(out)
	}
	w.write(b)
}

// requestMessage is the wizard call of a MicroWizard request: act routes
// by its args' root scalar pairs and hands the handler the args; actE
// routes by p and hands the handler d.
func requestMessage(in line, s runtime.Server) (*runtime.Message, error) {
	m := &runtime.Message{Codec: runtime.CodecJSON}
	if !in.sync() {
		m.Flags |= runtime.FlagNoReply
	}
	switch in.K {
	case kindAct:
		p, err := argsPattern(in.Args, s)
		if err != nil {
			return nil, err
		}
		m.Pattern, m.Payload = p, in.Args
	default:
		pt, err := pattern.Parse(in.P)
		if err != nil {
			return nil, err
		}
		m.Pattern = pt.String()
		if len(in.D) == 0 || string(in.D) == "null" {
			m.Codec = runtime.CodecNone
		} else {
			m.Payload = in.D
		}
	}
	if m.Pattern == introspect.CatalogPattern || m.Pattern == introspect.HealthPattern {
		return nil, errors.New("the system patterns are not served to MicroWizard")
	}
	return m, nil
}

// answer fills out with reply: its result as JSON, or its error.
func answer(out *line, reply *runtime.Message) {
	if reply.Code != runtime.CodeOK {
		out.Error = toLineError(reply)
		return
	}
	res, err := jsonOf(reply.Codec, reply.Payload, metaValue(reply.Meta, ":t"))
	if err != nil {
		out.Error = &lineError{Message: "wizard: microwizard: the result cannot be sent as JSON: " + err.Error(), Name: "Error", Code: runtime.CodeInternal.String()}
		return
	}
	if err := checkIntegers(res); err != nil {
		out.Error = &lineError{Message: "wizard: microwizard: the result cannot reach Node.js exactly: " + err.Error(), Name: "RangeError", Code: runtime.CodeOutOfRange.String()}
		return
	}
	if res == nil {
		res = json.RawMessage("null")
	}
	out.Res = res
}

func metaValue(meta []runtime.MetaPair, key string) string {
	for _, m := range meta {
		if m.Key == key {
			return m.Value
		}
	}
	return ""
}

// Shutdown stops accepting, refuses new requests as a closing
// MicroWizard does (retry_later_err_overload) and waits for running
// requests until ctx is done; then it closes the connections.
func (l *listener) Shutdown(ctx context.Context) error {
	l.draining.Store(true)
	l.ln.Close()
	done := make(chan struct{})
	go func() { l.serving.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = ctx.Err()
	}
	l.Close()
	return err
}

// Close stops at once: running handlers see their ctx cancelled.
func (l *listener) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	for c := range l.open {
		c.Close()
	}
	l.mu.Unlock()
	l.cancel()
	l.ln.Close()
	l.conns.Wait()
	l.serving.Wait()
	l.workers.Wait()
	return nil
}
