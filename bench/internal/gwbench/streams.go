package gwbench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

// StreamsConfig is the server stream scenario: Clients WebSocket clients
// of wizard-gateway, each with one server stream open through it to a
// streamer node in the mesh, which sends on every stream for Duration;
// each rate of Rates (messages/s per stream, 0: as fast as the stream's
// flow control allows) is a run with a fresh gateway and streamer. No
// Rates or no Clients: none.
type StreamsConfig struct {
	Clients  int
	Rates    []int
	Duration time.Duration
}

// StreamsResult is what one run of the stream scenario measured. A
// "message" is one msg frame received by one client.
type StreamsResult struct {
	Gateway string // WizardGateway, or WizardBaseline (Config.BaselineGateway's run paired with it)
	Clients int
	Rate    float64 // offered messages/s per stream, 0 for as fast as flow control allows
	Send    streamResult
	// Sent are the messages the streamer sent (its Sends that returned
	// without error), Received the msg frames the clients received.
	Sent, Received int64
	// Lost are the sent messages no client received (Gaps of them below
	// one it received); Duplicates received twice; LossyClients the
	// clients that missed any; BadEnds the streams whose end frame did
	// not come or was not a 200.
	Lost, Gaps, Duplicates int64
	LossyClients, BadEnds  int
	FirstBadEnd            string
	Latency                Stats // send to receipt, every message received
	// DeliveredFor is the time from the go to the last message received;
	// Received/DeliveredFor is the messages delivered per second.
	DeliveredFor time.Duration
	Connect      Stats     // a client's dial and req frame
	Res          Resources // the gateway's, from every stream open to the last end frame
	GatewayCPU   time.Duration
	// LoadCPU and StreamerCPU are this process's and the streamer's
	// average CPU, % of one core, over the same time.
	LoadCPU, StreamerCPU float64
}

// DeliveredPerSec is the messages received per second from the go to
// the last one.
func (r StreamsResult) DeliveredPerSec() float64 {
	if r.DeliveredFor > 0 {
		return float64(r.Received) / r.DeliveredFor.Seconds()
	}
	return 0
}

// SentPerSec is the messages sent per second of the streamer's run.
func (r StreamsResult) SentPerSec() float64 {
	if d := r.Send.End.Sub(r.Send.Start); d > 0 {
		return float64(r.Sent) / d.Seconds()
	}
	return 0
}

// passBins is the gateway binaries of the k-th run of an event push pass
// or of the stream scenario: this tree's alone, or with a baseline binary
// both, the baseline first in every other run so that the machine's drift
// does not favour one of them.
func (e *env) passBins(k int) []string {
	if e.baseBin == "" {
		return []string{e.gwBin}
	}
	if k%2 == 0 {
		return []string{e.gwBin, e.baseBin}
	}
	return []string{e.baseBin, e.gwBin}
}

// streamRuns runs cfg.Streams into rep.
func (e *env) streamRuns(ctx context.Context, cfg Config, rep *Report, logf func(string, ...any)) error {
	sc := cfg.Streams
	if sc.Clients <= 0 {
		return nil
	}
	for k, rate := range sc.Rates {
		for _, bin := range e.passBins(k) {
			r, err := e.streamsRun(ctx, sc, bin, float64(rate), logf)
			if err != nil {
				return fmt.Errorf("server streams at %d messages/s: %w", rate, err)
			}
			rep.Streams = append(rep.Streams, r)
		}
	}
	return nil
}

// streamsRun starts a gateway and a streamer, opens the clients'
// streams, has the streamer send, waits for every stream's end and stops
// both.
func (e *env) streamsRun(ctx context.Context, cfg StreamsConfig, bin string, rate float64, logf func(string, ...any)) (StreamsResult, error) {
	res := StreamsResult{Gateway: WizardGateway, Clients: cfg.Clients, Rate: rate}
	name := "streams@" + strconv.FormatFloat(rate, 'f', -1, 64)
	label := "streams-" + strconv.FormatFloat(rate, 'f', -1, 64)
	if bin != e.gwBin {
		res.Gateway, name, label = WizardBaseline, name+" (baseline)", label+"-baseline"
	}
	sm, err := e.child(ctx, childSpec{Role: roleStreamer, Listen: "127.0.0.1:0"})
	if err != nil {
		return res, err
	}
	defer e.stop(sm)
	g, _, err := e.startEventsGateway(ctx, bin, nil, label, sm.addr)
	if err != nil {
		return res, err
	}
	defer e.stopGateway(g)
	logf("server streams, %-20s wizard-gateway pid %d on %s, streamer pid %d", name, g.main.pid(), g.base, sm.pid())
	if err := waitStreamRoute(ctx, g.base+"/stream/0"); err != nil {
		return res, err
	}
	ask := func(q streamQuery, timeout time.Duration) (string, error) {
		b, _ := json.Marshal(q)
		return sm.Ask(ctx, string(b), timeout)
	}
	if a, err := ask(streamQuery{Op: "arm", Streams: cfg.Clients, Rate: rate, Duration: cfg.Duration}, time.Minute); err != nil || a != "ok" {
		return res, fmt.Errorf("the streamer answered %q to arm: %v", a, err)
	}

	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	clients, connects, err := openStreams(cctx, g.wsURL(), cfg.Clients)
	defer func() {
		for _, c := range clients {
			if c != nil {
				c.c.CloseNow()
			}
		}
	}()
	if err != nil {
		return res, err
	}
	if a, err := ask(streamQuery{Op: "opened"}, 2*time.Minute); err != nil || a != "ok" {
		return res, fmt.Errorf("the streamer answered %q to opened: %v", a, err)
	}
	res.Connect = summarise(connects, 0, "", 0)
	logf("server streams, %-20s %d streams open (connect+req p50 %v, p99 %v)", name, cfg.Clients, dur(res.Connect.P50), dur(res.Connect.P99))

	mons, err := startPushMonitors(g.main.pid(), sm.pid())
	if err != nil {
		return res, err
	}
	var received atomic.Int64
	var rg sync.WaitGroup
	for _, c := range clients {
		rg.Go(func() { c.receive(cctx, &received) })
	}
	fail := func(err error) (StreamsResult, error) {
		cancel()
		rg.Wait()
		mons.stop()
		return res, err
	}
	line, err := ask(streamQuery{Op: "go"}, cfg.Duration+3*time.Minute)
	if err != nil {
		return fail(err)
	}
	if err := json.Unmarshal([]byte(line), &res.Send); err != nil {
		return fail(fmt.Errorf("the streamer answered %q: %w", line, err))
	}
	if res.Send.Err != "" || len(res.Send.Sent) != cfg.Clients {
		return fail(fmt.Errorf("the streamer: %s (%d streams' counts)", res.Send.Err, len(res.Send.Sent)))
	}
	// Every stream has ended at the streamer: its end frame follows its
	// messages. The clients read until theirs comes; the guard is for a
	// stream the gateway lost.
	ended := make(chan struct{})
	go func() { rg.Wait(); close(ended) }()
	select {
	case <-ended:
	case <-time.After(time.Minute):
	case <-ctx.Done():
	}
	cancel()
	<-ended
	figs, err := mons.finish()
	if err != nil {
		return res, err
	}
	res.GatewayCPU, res.Res, res.LoadCPU, res.StreamerCPU = figs.GatewayCPU, figs.Res, figs.LoadCPU, figs.PushCPU
	if err := res.tally(clients); err != nil {
		return res, err
	}
	logf("server streams, %-20s %d messages sent (%.0f/s, %d errors), %d received (%.0f/s), %d lost, %d bad ends, p50 %v p99 %v max %v, gateway CPU avg %.0f%% (%v a message) RSS %.1f -> %.1f MiB",
		name, res.Sent, res.SentPerSec(), res.Send.Errors, res.Received, res.DeliveredPerSec(), res.Lost, res.BadEnds,
		dur(res.Latency.P50), dur(res.Latency.P99), dur(res.Latency.Max), res.Res.AvgCPU, dur(res.GatewayCPU/time.Duration(max(res.Received, 1))), mib(res.Res.StartRSS), mib(res.Res.MaxRSS))
	return res, ctx.Err()
}

// waitStreamRoute opens the stream route over HTTP until it answers 200
// (the streamer, no run armed, ends the stream at once): the gateway's
// node knows the streamer. A minute at most.
func waitStreamRoute(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	last := ""
	for {
		// A stream has no deadline: one opened before the gateway's node
		// knows the streamer would wait for it. Each try asks for 2 s.
		actx, acancel := context.WithTimeout(ctx, 5*time.Second)
		req, _ := http.NewRequestWithContext(actx, http.MethodGet, url, nil)
		req.Header.Set("X-Request-Timeout-Ms", "2000")
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			var b bytes.Buffer
			b.ReadFrom(resp.Body)
			resp.Body.Close()
			acancel()
			if resp.StatusCode == http.StatusOK && bytes.Contains(b.Bytes(), []byte(`"status":200`)) {
				return nil
			}
			last = fmt.Sprintf("%d %.200s", resp.StatusCode, b.Bytes())
		} else {
			acancel()
			last = err.Error()
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return fmt.Errorf("the stream route %s did not open: %s", url, last)
		}
	}
}

// streamClient is one WebSocket client of the stream scenario with its
// one stream, and what it received.
type streamClient struct {
	c      *websocket.Conn
	seen   bitset
	dups   int64
	maxSeq int64 // -1: nothing yet
	lat    []time.Duration
	lastAt time.Time
	end    []byte // the end frame, nil until it came
	bad    string // a frame that was neither a msg nor the end of the stream
}

// openStreams connects n clients to url, at most 64 at a time, each
// opening its stream (client i: GET /stream/i); it returns them with
// their connect times (the dial and the req frame's write: the stream's
// open is not answered until its first message).
func openStreams(ctx context.Context, url string, n int) ([]*streamClient, []time.Duration, error) {
	clients := make([]*streamClient, n)
	times := make([]time.Duration, n)
	var errs errCount
	sem := make(chan struct{}, 64)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			t0 := time.Now()
			w, err := dialWS(ctx, url, "")
			if err == nil {
				sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				err = w.c.Write(sctx, websocket.MessageText, []byte(`{"type":"req","id":"s","method":"GET","path":"/stream/`+strconv.Itoa(i)+`"}`))
				cancel()
				if err != nil {
					w.c.CloseNow()
				}
			}
			if err != nil {
				errs.add(fmt.Errorf("client %d: %w", i, err))
				return
			}
			times[i] = time.Since(t0)
			clients[i] = &streamClient{c: w.c, maxSeq: -1, lat: make([]time.Duration, 0, 1024)}
		})
	}
	wg.Wait()
	if errs.n.Load() > 0 {
		return clients, nil, fmt.Errorf("%d of %d clients could not open their stream; the first: %s", errs.n.Load(), n, errs.firstErr())
	}
	return clients, times, nil
}

// The frames of a client's stream "s".
var (
	msgPrefix = []byte(`{"type":"msg","id":"s","body":`)
	endPrefix = []byte(`{"type":"end","id":"s",`)
)

// receive reads the stream's msg frames until its end frame or ctx's
// end, noting each message's seq and its latency from the send time it
// carries (both wall clock, read on the same machine).
func (s *streamClient) receive(ctx context.Context, received *atomic.Int64) {
	for {
		_, data, err := s.c.Read(ctx)
		now := time.Now()
		if err != nil {
			return
		}
		if bytes.HasPrefix(data, endPrefix) {
			s.end = data
			return
		}
		var seq, t int64
		ok := bytes.HasPrefix(data, msgPrefix)
		if ok {
			var ok1, ok2 bool
			body := data[len(msgPrefix):]
			seq, ok1 = intField(body, `"seq":`)
			t, ok2 = intField(body, `"t":`)
			ok = ok1 && ok2
		}
		if !ok {
			if s.bad == "" {
				s.bad = fmt.Sprintf("not a msg frame of its stream with seq and t: %.200s", data)
			}
			continue
		}
		if s.seen.set(seq) {
			s.dups++
		}
		s.maxSeq = max(s.maxSeq, seq)
		s.lat = append(s.lat, time.Duration(now.UnixNano()-t))
		s.lastAt = now
		received.Add(1)
	}
}

// tally counts what the clients received against what the streamer sent
// on their streams (r.Send.Sent): messages received, lost, duplicated,
// the latencies, the ends. A frame that was no message of the client's
// stream, or a seq never sent on it, is an error.
func (r *StreamsResult) tally(clients []*streamClient) error {
	var lat []time.Duration
	var lastRecv time.Time
	for i, s := range clients {
		if s.bad != "" {
			return fmt.Errorf("client %d: %s", i, s.bad)
		}
		want := r.Send.Sent[i]
		if s.maxSeq >= want {
			return fmt.Errorf("client %d received seq %d, but %d messages were sent on its stream", i, s.maxSeq, want)
		}
		r.Sent += want
		got := s.seen.count()
		r.Received += got + s.dups
		r.Duplicates += s.dups
		if lost := want - got; lost > 0 {
			r.Lost += lost
			r.LossyClients++
			r.Gaps += s.maxSeq + 1 - got
		}
		if !bytes.Contains(s.end, []byte(`"status":200`)) {
			r.BadEnds++
			if r.FirstBadEnd == "" {
				r.FirstBadEnd = fmt.Sprintf("client %d: %.200s", i, s.end)
				if s.end == nil {
					r.FirstBadEnd = fmt.Sprintf("client %d: no end frame", i)
				}
			}
		}
		lat = append(lat, s.lat...)
		if s.lastAt.After(lastRecv) {
			lastRecv = s.lastAt
		}
	}
	r.Latency = summarise(lat, 0, "", 0)
	if !lastRecv.IsZero() {
		r.DeliveredFor = lastRecv.Sub(r.Send.Start)
	}
	return nil
}
