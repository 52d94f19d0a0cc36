package microwizard

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/bridge"
	"github.com/wizardmesh/wizard/runtime/introspect"
)

// senecaPath is where seneca-transport's HTTP wire posts acts.
const senecaPath = "/act"

// Seneca's HTTP headers.
const (
	hID         = "seneca-id"
	hKind       = "seneca-kind"
	hOrigin     = "seneca-origin"
	hAccept     = "seneca-accept"
	hTrack      = "seneca-track"
	hClientSent = "seneca-time-client-sent"
)

// httpListener serves Seneca's HTTP clients.
type httpListener struct {
	t   *Transport
	ln  net.Listener
	s   runtime.Server
	srv *http.Server
}

var _ runtime.Listener = (*httpListener)(nil)

func newHTTPListener(t *Transport, ln net.Listener, s runtime.Server) *httpListener {
	l := &httpListener{t: t, ln: ln, s: s}
	l.srv = &http.Server{Handler: l, ReadHeaderTimeout: 10 * time.Second, ErrorLog: nil}
	go l.srv.Serve(ln)
	return l
}

func (l *httpListener) Addr() string { return l.ln.Addr().String() }

// Shutdown stops accepting and waits for running requests until ctx is
// done.
func (l *httpListener) Shutdown(ctx context.Context) error { return l.srv.Shutdown(ctx) }

// Close stops at once.
func (l *httpListener) Close() error { return l.srv.Close() }

// ServeHTTP serves one act, as seneca-transport's listener does: 404 off
// its path, 500 with the error for a looped request or a failed act.
func (l *httpListener) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != senecaPath {
		http.NotFound(w, r)
		return
	}
	id := r.Header.Get(hID)
	var track []string
	if v := r.Header.Get(hTrack); v != "" {
		json.Unmarshal([]byte(v), &track) // Seneca takes a bad track as none
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set(hKind, "res")
	h.Set(hOrigin, cmpOr(r.Header.Get(hOrigin), "UNKNOWN"))
	h.Set(hAccept, l.t.senecaID)
	h.Set(hTrack, strings.Join(track, ","))
	h.Set(hID, cmpOr(id, l.t.senecaID))
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, int64(l.t.maxLine)))
	if err != nil {
		writeJSON(w, http.StatusRequestEntityTooLarge, lineError{Message: "wizard: seneca: " + err.Error(), Name: "RangeError", Code: runtime.CodeResourceExhausted.String()})
		return
	}
	if slices.Contains(track, l.t.senecaID) {
		l.t.log.Warn("wizard: seneca: a request refused", "remote", r.RemoteAddr, "why", "message_loop")
		writeJSON(w, http.StatusInternalServerError, lineError{Message: "seneca: Inbound message rejected as looping back to this server.", Name: "Error", Code: "message_loop"})
		return
	}
	m, err := requestMessage(line{K: kindAct, Args: body}, l.s)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, lineError{Message: "wizard: seneca: " + err.Error(), Name: "Error", Code: runtime.CodeInvalidArgument.String()})
		return
	}
	m.Remote, m.Deadline = runtime.NewRemote("seneca-http", r.RemoteAddr, nil), l.t.serveTimeout
	ctx, cancel := context.WithTimeout(withTrack(r.Context(), track), l.t.serveTimeout)
	defer cancel()
	reply := l.s.ServeMessage(ctx, m)
	var out line
	answer(&out, reply)
	switch {
	case out.Error != nil && out.Error.Message == overloadMessage:
		writeJSON(w, http.StatusServiceUnavailable, out.Error)
	case out.Error != nil:
		writeJSON(w, http.StatusInternalServerError, out.Error)
	default:
		w.WriteHeader(http.StatusOK)
		w.Write(out.Res)
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, _ := json.Marshal(v)
	w.WriteHeader(code)
	w.Write(b)
}

// httpConn calls one Seneca HTTP listener.
type httpConn struct {
	t    *Transport
	ff   *fireAndForget // no-reply calls
	addr string
	url  string
	cl   *http.Client
	seq  uint64
	mu   sync.Mutex
	done chan struct{}
	once sync.Once
}

var _ runtime.Conn = (*httpConn)(nil)

func newHTTPConn(t *Transport, addr string) *httpConn {
	tr := &http.Transport{MaxIdleConnsPerHost: 256, IdleConnTimeout: 90 * time.Second, DialContext: (&net.Dialer{Timeout: dialTimeout}).DialContext}
	return &httpConn{t: t, addr: addr, url: "http://" + addr + senecaPath, cl: &http.Client{Transport: tr}, done: make(chan struct{}), ff: newFireAndForget(t.maxPending)}
}

func (c *httpConn) Done() <-chan struct{} { return c.done }

func (c *httpConn) Close() error {
	c.once.Do(func() {
		close(c.done)
		c.ff.stop()
		c.cl.CloseIdleConnections()
	})
	return nil
}

// Call posts m as an act and reads the answer.
func (c *httpConn) Call(ctx context.Context, m *runtime.Message) (*runtime.Message, error) {
	switch m.Pattern {
	case introspect.CatalogPattern:
		return pinCatalog(c.t, c.addr)
	case introspect.HealthPattern:
		return &runtime.Message{Code: runtime.CodeUnimplemented, Error: "wizard: seneca: Seneca nodes have no health pattern"}, nil
	}
	where := "wizard: seneca-http: " + c.addr
	select {
	case <-c.done:
		return nil, bridge.NotSent(where, net.ErrClosed)
	default:
	}
	l, err := requestLine(m)
	if err != nil {
		return nil, runtime.Errorf(runtime.CodeInvalidArgument, "wizard: seneca: call %s: %v", m.Pattern, err)
	}
	c.mu.Lock()
	c.seq++
	l.ID = strconv.FormatUint(c.seq, 36)
	c.mu.Unlock()
	sl := senecaLine(c.t.senecaID, outgoingTrack(ctx, c.t.senecaID), l)
	if len(sl.Act) > c.t.maxLine {
		return nil, runtime.Errorf(runtime.CodeResourceExhausted, "wizard: seneca: call %s: %d bytes, longer than the bound %d", m.Pattern, len(sl.Act), c.t.maxLine)
	}
	if err := checkIntegers(sl.Act); err != nil {
		return nil, runtime.Errorf(runtime.CodeOutOfRange, "wizard: seneca: call %s: %v", m.Pattern, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(sl.Act))
	if err != nil {
		return nil, bridge.NotSent(where, err)
	}
	track, _ := json.Marshal(sl.Track)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set(hID, sl.ID)
	req.Header.Set(hKind, "req")
	req.Header.Set(hOrigin, c.t.senecaID)
	req.Header.Set(hTrack, string(track))
	req.Header.Set(hClientSent, strconv.FormatInt(sl.Time.ClientSent, 10))
	if m.Flags&runtime.FlagNoReply != 0 {
		return nil, c.ff.post(ctx, c, req, where)
	}
	res, err := c.cl.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			return nil, bridge.NotSent(where, err)
		}
		return nil, bridge.Lost(where, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, int64(c.t.maxLine)+1))
	if err != nil {
		return nil, bridge.Lost(where, err)
	}
	if len(b) > c.t.maxLine {
		return nil, bridge.Lost(where, fmt.Errorf("an answer longer than the bound %d", c.t.maxLine))
	}
	if res.StatusCode != http.StatusOK {
		var e lineError
		if json.Unmarshal(b, &e) != nil || e.Message == "" {
			e = lineError{Message: fmt.Sprintf("wizard: seneca: HTTP %d", res.StatusCode)}
		}
		return fromLineError(&e), nil
	}
	return replyMessage(line{Res: b}), nil
}
