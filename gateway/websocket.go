package gateway

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/wizardmesh/wizard/gateway/auth"
	"github.com/wizardmesh/wizard/runtime"
)

// WebSocket close codes (DESIGN §8).
const (
	closeNormal       = websocket.StatusNormalClosure  // 1000
	closeGoingAway    = websocket.StatusGoingAway      // 1001: idle, or shut down with requests cut short
	closeRestart      = websocket.StatusServiceRestart // 1012: drained: every request taken was answered
	closePolicy       = websocket.StatusPolicyViolation
	closeTooBig       = websocket.StatusMessageTooBig // 1009 (the library closes with it)
	closeInternal     = websocket.StatusInternalError
	closeTokenExpired = websocket.StatusCode(4001) // reconnect after refreshing the token
	closeSlowConsumer = websocket.StatusCode(4008)
	closeRateLimited  = websocket.StatusCode(4029) // ws.maxLimited rate-limited replies in a row
	closeInvalidToken = websocket.StatusCode(4501)
)

// wsWriteTimeout bounds one frame's write when the server has no write
// timeout.
const wsWriteTimeout = 10 * time.Second

// wsConn is one WebSocket connection: a reader (see [wsConn.serve])
// and a goroutine per request in flight. Frames to send wait in a bounded
// send queue, drained by whoever queued a frame when no writer was at
// work (a request's goroutine writes its reply itself); pings run on a
// timer. An idle connection holds one goroutine.
type wsConn struct {
	g    *Gateway
	ws   wsSettings // as the connection was opened with
	c    *websocket.Conn
	nc   net.Conn     // the hijacked connection, for write deadlines; nil: none
	bw   *batchWriter // under the library's write buffer; nil without nc
	ip   string
	send *sendQueue

	ctx    context.Context // the requests', ended when the connection closes
	cancel context.CancelFunc

	mu       sync.Mutex
	inflight map[string]inflight  // requests and streams
	streams  map[string]*wsStream // the streams among them; nil until the first
	routing  chan struct{}        // closed when a request is routed, for the reader waiting on one (nil: none waits)
	id       *auth.Identity
	claims   map[string]any    // the identity's claims that event templates read
	subs     map[string]*wsSub // event subscriptions by id; nil until the first
	expiry   *time.Timer
	idle     *time.Timer // nil without an idle timeout
	pinger   *time.Timer // nil without pings
	draining bool
	garbage  int
	limited  int // rate-limited replies in a row

	closed atomic.Bool    // set under mu, with tasks' count for the closer
	reqs   sync.WaitGroup // requests in flight
	tasks  sync.WaitGroup // a writer, a ping and the closer, each counted under mu while open
}

// outMsg is a frame to send, or (close != 0) the close that follows the
// frames queued before it.
type outMsg struct {
	b      []byte
	close  websocket.StatusCode
	reason string
	// written, when set, is told when b has been written: a stream
	// counts with it its frames queued ahead of the socket.
	written chan<- struct{}
}

// serveWebSocket upgrades a request on the WebSocket path: Origin
// allow-list, per-IP rate, a token at the upgrade if any; then it serves
// the connection on a goroutine of its own (see [wsConn.serve]) and
// returns the status of the upgrade, which the access log records then
// (each request frame has a line of its own).
func (g *Gateway) serveWebSocket(w http.ResponseWriter, r *http.Request, rid string) int {
	fail := func(e *apiError) int { writeError(w, e, rid); return e.status }
	if g.closing.Load() {
		e := newAPIError(http.StatusServiceUnavailable, runtime.CodeUnavailable, "the gateway is shutting down")
		e.retryAfter = retryAfter
		return fail(e)
	}
	l := g.now()
	origins := l.set.ws.origins
	if o := r.Header.Get("Origin"); o != "" && len(origins) > 0 && !originAllowed(origins, o) {
		return fail(newAPIError(http.StatusForbidden, runtime.CodePermissionDenied, "origin "+clipString(o, 100)+" may not open a WebSocket here"))
	}
	if e := g.limit(l.ipLim, l.clientIP(r)); e != nil {
		return fail(e)
	}
	id, e := l.upgradeIdentity(r)
	if e != nil {
		return fail(e)
	}
	hw := &hijackWriter{ResponseWriter: w}
	c, err := websocket.Accept(hw, r, &websocket.AcceptOptions{InsecureSkipVerify: len(origins) > 0})
	if err != nil {
		// Accept has answered: a cross-origin request without an
		// allow-list (403), or not a WebSocket handshake (400, 426).
		return http.StatusForbidden
	}
	c.SetReadLimit(l.set.ws.maxMessage)
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	wc := &wsConn{
		g: g, ws: l.set.ws, c: c, nc: hw.conn, bw: hw.batch, ip: l.clientIP(r),
		send: newSendQueue(l.set.ws.sendQueue, l.set.ws.eventQueue),
		ctx:  ctx, cancel: cancel, inflight: make(map[string]inflight),
	}
	if !g.addConn(wc) {
		c.Close(closeRestart, "the gateway is shutting down")
		cancel()
		return http.StatusSwitchingProtocols
	}
	// The connection is served on a goroutine of its own and this one,
	// net/http's, returns: it would keep net/http's connection, request
	// and buffers (some 10 KiB) for the WebSocket's life.
	go wc.serve(id)
	return http.StatusSwitchingProtocols
}

// serve serves an upgraded connection until it closes: the identity of
// the upgrade (nil: none yet), the idle timeout and pings, the reader;
// then it waits for the requests in flight and the connection's tasks.
func (wc *wsConn) serve(id *auth.Identity) {
	g := wc.g
	defer g.removeConn(wc)
	if id != nil {
		wc.setIdentity(id)
	}
	if d := wc.ws.idle; d > 0 {
		wc.idle = time.AfterFunc(d, func() { wc.closeWith(closeGoingAway, "idle") })
	}
	if d := wc.ws.ping; d > 0 {
		wc.mu.Lock()
		wc.pinger = time.AfterFunc(d, wc.ping)
		wc.mu.Unlock()
	}
	wc.read()
	if wc.idle != nil {
		wc.idle.Stop()
	}
	wc.closeWith(closeNormal, "")
	wc.reqs.Wait()
	wc.tasks.Wait()
}

// upgradeIdentity verifies a token given with the upgrade: the
// Authorization header (clients that can set it), or the access_token
// query parameter (browsers cannot set headers on a WebSocket; the first
// auth frame keeps the token out of URLs and is preferred).
func (l *live) upgradeIdentity(r *http.Request) (*auth.Identity, *apiError) {
	token, e := bearer(r.Header.Get("Authorization"))
	if e != nil {
		return nil, e
	}
	if token == "" {
		token = r.URL.Query().Get("access_token")
	}
	if token == "" {
		return nil, nil
	}
	return l.verifyOnce(r.Context(), token)
}

func (g *Gateway) addConn(wc *wsConn) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closing.Load() {
		return false
	}
	g.conns[wc] = struct{}{}
	g.connWG.Add(1)
	return true
}

func (g *Gateway) removeConn(wc *wsConn) {
	g.mu.Lock()
	delete(g.conns, wc)
	g.mu.Unlock()
	g.connWG.Done()
}

// read serves the client's frames until the connection fails or closes.
func (wc *wsConn) read() {
	for {
		typ, data, err := wc.c.Read(context.Background())
		if err != nil {
			return // closed by either side, or over the size limit (1009, by the library)
		}
		if wc.closed.Load() {
			return
		}
		wc.active()
		if typ != websocket.MessageText {
			wc.invalid(&frameError{msg: "frames are text messages of one JSON object"})
			continue
		}
		f, fe := decodeFrame(data)
		if fe != nil {
			wc.invalid(fe)
			continue
		}
		switch {
		case f.ping():
			wc.enqueue([]byte("{}"))
		case f.Type == frameAuth:
			wc.auth(f)
		case f.Type == frameCancel:
			wc.cancelReq(*f.ID)
		case f.Type == frameReq:
			wc.request(f)
		case f.Type == frameMsg:
			wc.streamMsg(f)
		case f.Type == frameEnd:
			wc.streamEnd(*f.ID)
		case f.Type == frameSub:
			wc.subscribe(f)
		case f.Type == frameUnsub:
			wc.unsubscribe(f.ID)
		}
	}
}

// active pushes the idle timeout back: the client is there.
func (wc *wsConn) active() {
	if wc.idle != nil {
		wc.idle.Reset(wc.ws.idle)
	}
}

// ping sends a protocol ping (browsers answer them without the page's
// help), the pinger timer's function: a pong counts as activity, and the
// next ping follows an interval after this one's answer.
func (wc *wsConn) ping() {
	if !wc.task() {
		return
	}
	defer wc.tasks.Done()
	interval := wc.ws.ping
	wait := max(interval, wc.ws.idle) // the pong may take until the idle timeout
	ctx, cancel := context.WithTimeout(wc.ctx, wait)
	err := wc.c.Ping(ctx)
	cancel()
	if err == nil {
		wc.active()
	}
	wc.mu.Lock()
	if !wc.closed.Load() {
		wc.pinger.Reset(interval)
	}
	wc.mu.Unlock()
}

// task counts a task of the connection (a writer, a ping) in tasks,
// unless the connection is closed: then it reports false. Counted under
// mu, a task is always in tasks before the reader waits for them.
func (wc *wsConn) task() bool {
	wc.mu.Lock()
	defer wc.mu.Unlock()
	if wc.closed.Load() {
		return false
	}
	wc.tasks.Add(1)
	return true
}

// invalid answers a frame that cannot be acted on (400, id if known) and
// closes the connection (1008) after too many.
func (wc *wsConn) invalid(fe *frameError) {
	wc.enqueue(resFrame(fe.id, "", nil, badRequest(fe.msg)))
	wc.mu.Lock()
	wc.garbage++
	n := wc.garbage
	wc.mu.Unlock()
	if n >= wc.ws.maxGarbage {
		wc.closeAfterQueued(closePolicy, "too many invalid frames")
	}
}

// auth verifies an auth frame's token: the connection's identity from
// then on (a later auth frame refreshes it). An invalid token is answered
// and closes the connection (4501); verification unavailable (503) is
// answered and the connection stays.
func (wc *wsConn) auth(f inFrame) {
	// The verification (JSON claims decoded by reflection, the signature's
	// crypto) and the answer's encoding run on a goroutine of their own,
	// which the reader waits for: on the reader's goroutine they would
	// grow its stack from 2 KiB to 4–8 KiB, and an idle connection's
	// reader keeps its stack for the connection's life (some 6 MiB more
	// at 1,000 connections that each sent an auth frame).
	done := make(chan struct{})
	go func() {
		defer close(done)
		wc.authNow(f)
	}()
	<-done
}

func (wc *wsConn) authNow(f inFrame) {
	id, e := wc.g.now().verifyOnce(wc.ctx, f.Token)
	ok := e == nil
	out := outFrame{Type: frameAuth, ID: f.ID, OK: &ok}
	if e != nil {
		eb := e.body()
		out.Status, out.Error = e.status, &eb
		wc.enqueue(marshalFrame(out))
		if e.status == http.StatusUnauthorized {
			wc.closeAfterQueued(closeInvalidToken, "invalid token")
		} // else verification is unavailable (503): the client may try again
		return
	}
	if !wc.setIdentity(id) {
		e := newAPIError(http.StatusForbidden, runtime.CodePermissionDenied, "the connection is authenticated as another subject: a token refreshes its own subject only; open a new connection for another")
		eb := e.body()
		ok = false
		out.Status, out.Error = e.status, &eb
		wc.enqueue(marshalFrame(out))
		return
	}
	out.Subject = id.Subject
	if !id.ExpiresAt.IsZero() {
		out.ExpiresAt = id.ExpiresAt.UTC().Format(time.RFC3339)
	}
	wc.enqueue(marshalFrame(out))
	wc.recheckSubs() // the refreshed token's scopes and claims may allow less
}

// setIdentity makes id the connection's identity, closing the connection
// (4001) when its token expires. A connection keeps its subject: a token
// of another subject or issuer changes nothing (false); one of the same
// refreshes the scopes and the expiry.
func (wc *wsConn) setIdentity(id *auth.Identity) bool {
	claims := keptClaims(id, wc.g.now().claims)
	id = connIdentity(id)
	wc.mu.Lock()
	defer wc.mu.Unlock()
	if wc.id != nil && (wc.id.Subject != id.Subject || wc.id.Issuer != id.Issuer) {
		return false
	}
	wc.id, wc.claims = id, claims
	if wc.expiry != nil {
		wc.expiry.Stop()
		wc.expiry = nil
	}
	if !id.ExpiresAt.IsZero() {
		wc.expiry = time.AfterFunc(time.Until(id.ExpiresAt), func() {
			wc.closeWith(closeTokenExpired, "token expired")
		})
	}
	return true
}

// connIdentity is what a connection keeps of a verified identity for its
// life: the subject, issuer and scopes its calls carry and the expiry that
// closes it. The claims map and the audience are dropped: a verifier's
// claims (a map of every claim of the token, decoded by reflection) cost
// more than a kilobyte per connection, and nothing after the auth frame
// reads them.
func connIdentity(id *auth.Identity) *auth.Identity {
	if id.Claims == nil && id.Audience == nil {
		return id
	}
	return &auth.Identity{Subject: id.Subject, Issuer: id.Issuer, Scopes: slices.Clip(id.Scopes), ExpiresAt: id.ExpiresAt}
}

// inflight is a request in flight on a connection.
type inflight struct {
	cancel context.CancelFunc
	routed bool // its route is known: it is a stream (in streams) or not
}

// request starts serving a req frame, unless the connection is draining,
// the id is in flight already, or the in-flight limit is reached (429).
func (wc *wsConn) request(f inFrame) {
	id := *f.ID
	wc.mu.Lock()
	var e *apiError
	switch {
	case wc.draining:
		e = newAPIError(http.StatusServiceUnavailable, runtime.CodeUnavailable, "the gateway is shutting down")
		e.retryAfter = retryAfter
	case wc.inflight[id].cancel != nil:
		e = badRequest("request id " + id + " is already in flight on this connection")
	case len(wc.inflight) >= wc.ws.maxInflight:
		e = newAPIError(http.StatusTooManyRequests, runtime.CodeResourceExhausted, "too many requests in flight on this connection")
		e.retryAfter = 1
	}
	if e != nil {
		wc.mu.Unlock()
		wc.enqueue(resFrame(f.ID, "", nil, e))
		return
	}
	ctx, cancel := context.WithCancel(wc.ctx)
	wc.inflight[id] = inflight{cancel: cancel}
	caller := wc.id
	wc.reqs.Add(1)
	wc.mu.Unlock()
	go func() {
		defer wc.reqs.Done()
		defer cancel()
		// The route is looked up here, not on the reader: its stack,
		// which an idle connection keeps, stays small.
		rt := wc.route(f)
		st, e := wc.routed(id, rt, cancel)
		if st != nil || e != nil {
			wc.stream(ctx, f, rt, caller, st, e)
			return
		}
		rid := newRequestID()
		r, e := wc.serveReq(ctx, f, rt, caller, rid)
		write := wc.queue(resFrameStatus(f.ID, rid, r.statusOr(), r.body, e))
		// The id is free before its reply is written: a client may send
		// it again as soon as it has the reply. A close that done or
		// countLimited queues follows the reply.
		wc.done(id)
		wc.countLimited(e)
		if write {
			wc.writeQueued() // this goroutine has the writer's turn: no other is needed
		}
	}()
}

// routed records that request id's route is known, and wakes the
// reader if it waits for that: for a streaming route it returns the
// stream, or the refusal of one over the stream limit (429).
func (wc *wsConn) routed(id string, rt wsRoute, cancel context.CancelFunc) (*wsStream, *apiError) {
	kind := streamNone
	if rt.e == nil {
		kind = rt.m.policy.stream
	}
	wc.mu.Lock()
	defer wc.mu.Unlock()
	wc.inflight[id] = inflight{cancel: cancel, routed: true}
	if wc.routing != nil {
		close(wc.routing)
		wc.routing = nil
	}
	switch {
	case kind == streamNone:
		return nil, nil
	case len(wc.streams) >= wc.ws.maxStreams:
		e := newAPIError(http.StatusTooManyRequests, runtime.CodeResourceExhausted, "too many streams open on this connection (at most "+strconv.Itoa(wc.ws.maxStreams)+"): end one first")
		e.retryAfter = 1
		return nil, e
	}
	st := newWSStream(kind, cancel, wc.ws.aheadFrames())
	if wc.streams == nil {
		wc.streams = make(map[string]*wsStream)
	}
	wc.streams[id] = st
	return st, nil
}

// wsRoute is a req frame's route as the reader looked it up; its
// errors are answered in their turn by serveReq.
type wsRoute struct {
	l *live
	u *url.URL // nil: the path is not valid
	m match
	e *apiError // the lookup's
}

func (wc *wsConn) route(f inFrame) wsRoute {
	l := wc.g.now()
	u, err := url.ParseRequestURI(f.Path)
	if err != nil {
		return wsRoute{l: l, e: badRequest("req frame's path is not a valid path")}
	}
	m, e := l.t.lookup(f.Method, u.EscapedPath())
	return wsRoute{l: l, u: u, m: m, e: e}
}

// countLimited counts the rate limits' 429s in a row (any other reply
// starts over; the in-flight limit's 429s are not replies of serveReq)
// and closes the connection (4029) at ws.maxLimited: a client that keeps
// sending past its limit is told to back off for good.
func (wc *wsConn) countLimited(e *apiError) {
	wc.mu.Lock()
	if e != nil && e.limited {
		wc.limited++
	} else {
		wc.limited = 0
	}
	n := wc.limited
	wc.mu.Unlock()
	if n >= wc.ws.maxLimited {
		wc.closeAfterQueued(closeRateLimited, "rate limited")
	}
}

// done ends request id; the last of a draining connection closes it.
func (wc *wsConn) done(id string) {
	wc.mu.Lock()
	delete(wc.inflight, id)
	last := wc.draining && len(wc.inflight) == 0
	wc.mu.Unlock()
	if last {
		wc.closeAfterQueued(closeRestart, "the gateway is shutting down")
	}
}

// serveReq serves one req frame as its HTTP request would be served.
func (wc *wsConn) serveReq(ctx context.Context, f inFrame, rt wsRoute, id *auth.Identity, rid string) (r reply, e *apiError) {
	g := wc.g
	start := time.Now()
	a := access{rid: rid}
	if id != nil {
		a.subject = id.Subject
	}
	defer func() {
		a.status = r.statusOr()
		if e != nil {
			a.status = e.status
		}
		g.logFrame(f, wc.ip, &a, time.Since(start))
	}()
	c, e := wc.callOf(f, rt, id, rid, &a)
	if e != nil {
		return reply{}, e
	}
	return g.call(ctx, c)
}

// callOf checks a req frame as its HTTP request would be checked (the
// path, the per-IP rate, the route, its auth) and returns its call.
func (wc *wsConn) callOf(f inFrame, rt wsRoute, id *auth.Identity, rid string, a *access) (call, *apiError) {
	if rt.u == nil {
		return call{}, rt.e
	}
	if e := wc.g.limit(rt.l.ipLim, wc.ip); e != nil {
		return call{}, e
	}
	if rt.e != nil {
		return call{}, rt.e
	}
	a.route = rt.m.policy.name
	if e := authorize(rt.m.policy, id); e != nil {
		return call{}, e
	}
	var raw []byte
	if len(f.Body) > 0 && string(f.Body) != "null" {
		raw = f.Body
	}
	return call{l: rt.l, m: rt.m, method: f.Method, path: rt.u.Path, query: rt.u.Query(), body: raw, hint: time.Duration(min(f.TimeoutMs, maxHintMs)) * time.Millisecond, id: id, rid: rid}, nil
}

// cancelReq cancels request id's mesh call, if it is in flight; its
// reply (499, canceled) follows.
func (wc *wsConn) cancelReq(id string) {
	wc.mu.Lock()
	cancel := wc.inflight[id].cancel
	wc.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// enqueue queues a frame, starting a writer if none is at work; a full
// queue is a slow consumer, closed (4008).
func (wc *wsConn) enqueue(b []byte) {
	if wc.queue(b) {
		wc.startWriter()
	}
}

// queue queues a frame and reports whether the caller has the writer's
// turn (then it must call writeQueued, or startWriter); a full queue is a
// slow consumer, closed (4008).
func (wc *wsConn) queue(b []byte) (write bool) {
	if wc.closed.Load() {
		return false
	}
	ok, write := wc.send.push(outMsg{b: b})
	if !ok {
		wc.g.log.Warn("gateway: websocket slow consumer: the send queue is full, closing", "remote", wc.ip, "queue", wc.send.max)
		wc.closeWith(closeSlowConsumer, "slow consumer")
	}
	return write
}

// startWriter writes the queued frames on a goroutine of their own: for
// the reader, which must not stop reading to write, and the rest that
// queue a frame without a request's goroutine.
func (wc *wsConn) startWriter() {
	if !wc.task() {
		return // closed: nothing more is sent
	}
	go func() {
		defer wc.tasks.Done()
		wc.writeQueued()
	}()
}

// writeQueued sends the queued frames until the queue is empty (the
// writer's turn ends) or the connection closes. A frame's write has the
// server's write timeout (wsWriteTimeout without one), a deadline of the
// connection cleared after it, so that the library's own writes (a pong,
// the close handshake) never meet a deadline that has passed.
//
// When more frames wait behind the one taken, their bytes are held (see
// [batchWriter]) and written together, with one system call and one
// deadline, once the queue has no more or a batch is held (wsBatchFrames
// frames or wsBatchBytes); a
// frame alone is written at once. The frames go out in the queue's order
// either way, and a stream is told its frame was written once the batch
// it is in has been.
func (wc *wsConn) writeQueued() {
	timeout := wc.g.set.writeTimeout
	if timeout <= 0 {
		timeout = wsWriteTimeout
	}
	var (
		holding bool
		frames  int               // held
		written []chan<- struct{} // the held frames' streams
	)
	// release writes the held frames: false when the connection failed
	// (then closed).
	release := func() bool {
		holding, frames = false, 0
		wc.nc.SetWriteDeadline(time.Now().Add(timeout))
		err := wc.bw.release()
		wc.nc.SetWriteDeadline(time.Time{})
		if err != nil {
			written = written[:0]
			wc.closeWith(closeInternal, "write failed")
			return false
		}
		for _, w := range written {
			w <- struct{}{} // room: a stream has no more frames queued than written holds
		}
		written = written[:0]
		return true
	}
	for {
		m, more, ok := wc.send.next()
		if !ok {
			return // nothing is held: the last frame taken had no more behind it
		}
		if wc.closed.Load() {
			if holding {
				release() // the frames before the close (and the close frame, if held) go out
			}
			return // the turn stays taken: nothing more is sent
		}
		if m.close != 0 {
			if holding && !release() {
				return
			}
			wc.closeWith(m.close, m.reason)
			return
		}
		if more && !holding && wc.bw != nil {
			wc.bw.hold()
			holding = true
		}

		var err error
		switch {
		case holding:
			// Into the held bytes: no system call, no deadline.
			err = wc.c.Write(context.Background(), websocket.MessageText, m.b)
		case wc.nc != nil:
			wc.nc.SetWriteDeadline(time.Now().Add(timeout))
			err = wc.c.Write(context.Background(), websocket.MessageText, m.b)
			wc.nc.SetWriteDeadline(time.Time{})
		default:
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			err = wc.c.Write(ctx, websocket.MessageText, m.b)
			cancel()
		}
		if err != nil {
			if holding {
				wc.bw.release() // the close frame, if the library held one, goes out
			}
			wc.closeWith(closeInternal, "write failed")
			return
		}
		if holding {
			if m.written != nil {
				written = append(written, m.written)
			}
			if frames++; (!more || frames >= wsBatchFrames || wc.bw.held() >= wsBatchBytes) && !release() {
				return
			}
			continue
		}
		if m.written != nil {
			m.written <- struct{}{} // room: a stream has no more frames queued than written holds
		}
	}
}

// closeAfterQueued closes the connection once the frames queued so far
// are sent.
func (wc *wsConn) closeAfterQueued(code websocket.StatusCode, reason string) {
	if wc.closed.Load() {
		return
	}
	ok, write := wc.send.push(outMsg{close: code, reason: reason})
	switch {
	case !ok:
		wc.closeWith(code, reason)
	case write:
		wc.startWriter()
	}
}

// closeWith closes the connection with code (once): the requests in
// flight are canceled, and the close handshake runs on its own goroutine
// (it may wait seconds on the peer).
func (wc *wsConn) closeWith(code websocket.StatusCode, reason string) {
	wc.mu.Lock()
	if wc.closed.Load() {
		wc.mu.Unlock()
		return
	}
	wc.closed.Store(true)
	wc.tasks.Add(1) // under mu: before the reader, whose own closeWith follows, waits
	if wc.expiry != nil {
		wc.expiry.Stop()
	}
	if wc.pinger != nil {
		wc.pinger.Stop()
	}
	subs := wc.subs
	wc.subs = nil
	wc.mu.Unlock()
	wc.cancel()
	go func() {
		defer wc.tasks.Done()
		for _, s := range subs {
			wc.g.events.remove(s) // the node's subscription goes with its last socket
		}
		if err := wc.c.Close(code, reason); err != nil && !errors.Is(err, context.Canceled) {
			wc.c.CloseNow()
		}
	}()
}

// closeNow is closeWith for Close and a shutdown past its grace.
func (wc *wsConn) closeNow(code websocket.StatusCode, reason string) { wc.closeWith(code, reason) }

// drain lets the requests in flight finish, refuses new ones (503), then
// closes the connection after their replies with 1012: a client may send
// again, on a new connection, any request that got no reply, as none of
// them ran.
func (wc *wsConn) drain() {
	wc.mu.Lock()
	wc.draining = true
	idle := len(wc.inflight) == 0
	wc.mu.Unlock()
	if idle {
		wc.closeAfterQueued(closeRestart, "the gateway is shutting down")
	}
}
