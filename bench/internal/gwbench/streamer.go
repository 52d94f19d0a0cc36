package gwbench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"time"

	wizard "github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/tcp"
)

// roleStreamer is a wizard node over TCP serving the stream scenario's
// server streams: the mesh service whose messages wizard-gateway relays
// to its WebSocket clients as msg frames.
const roleStreamer = "wizard-streamer"

// streamPattern is the streamer's pattern; a stream's first message
// carries the client's index as "c" (the route's path variable).
const streamPattern = "role:gwbench,cmd:stream"

// streamQuery is a query of the streamer: one line of JSON on its stdin,
// answered with one line. "arm" (answered "ok") makes the next Streams
// streams opened to it a run: each waits, once open, for "go". "opened"
// is answered "ok" once all Streams are open (or with an error after a
// minute). "go" starts them: stream c sends its message i, {"seq":i,"t":T},
// at its schedule (1/Rate apart, stream c's first c/Streams of an
// interval after the start, so that the streams' sends are spread, not in
// step), T the wall clock (Unix nanoseconds) just before its Send; rate 0
// sends as fast as Send returns (the stream's flow control). Each stream
// ends (returns OK) once its next message would be due past Duration;
// "go" is answered with a streamResult once every stream has ended. A
// stream opened without a run armed ends at once: the benchmark's probe
// that the gateway's node knows the streamer.
type streamQuery struct {
	Op       string        `json:"op"`
	Streams  int           `json:"streams,omitempty"`
	Rate     float64       `json:"rate,omitempty"` // messages/s per stream; 0: as fast as flow control allows
	Duration time.Duration `json:"duration,omitempty"`
}

// streamResult is the streamer's answer to "go".
type streamResult struct {
	// Sent is each stream's messages sent (seqs 0 to Sent[c]-1, stream c
	// the client's index); a Send that failed is not counted, and ends
	// its stream.
	Sent     []int64       `json:"sent"`
	Errors   int64         `json:"errors"`
	FirstErr string        `json:"first_err,omitempty"`
	Start    time.Time     `json:"start"`  // the go
	End      time.Time     `json:"end"`    // the last stream's end
	Behind   time.Duration `json:"behind"` // the largest lag of a send behind its schedule
	SendP50  time.Duration `json:"send_p50"`
	SendP99  time.Duration `json:"send_p99"` // a Send's duration: long when the stream's window is full
	Err      string        `json:"err,omitempty"`
}

// streamRun is an armed run of the streamer.
type streamRun struct {
	q       streamQuery
	opened  int
	allOpen chan struct{} // closed when q.Streams are open
	start   chan struct{} // closed by go
	t0      time.Time     // set before start is closed
	end     time.Time
	wg      sync.WaitGroup
	errs    errCount
	mu      sync.Mutex
	sent    []int64
	took    []time.Duration
	behind  time.Duration
	claimed []bool // a stream of client c is open (a second one is refused)
}

// streamer is roleStreamer's state.
type streamer struct {
	mu  sync.Mutex
	run *streamRun
}

// serveStreamer serves roleStreamer: a node listening on s.Listen, its
// address on out, then one answer per streamQuery of in.
func serveStreamer(s childSpec, in io.Reader, out io.Writer) error {
	t, err := tcp.New()
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})).With("process", roleStreamer)
	// It listens, and the gateway's node has it as a static peer (a node
	// that joins the gateway's, as the emitter does, is not one the
	// gateway's node calls).
	node, err := wizard.New(wizard.WithTransport(t), wizard.WithListen(s.Listen), wizard.WithLogger(log))
	if err != nil {
		return err
	}
	defer node.Close()
	st := &streamer{}
	if err := node.Add(streamPattern, wizard.NewStreamHandler(st.serve)); err != nil {
		return err
	}
	if _, err := fmt.Fprintln(out, node.Addr()); err != nil {
		return err
	}
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		var q streamQuery
		answer := "ok"
		if err := json.Unmarshal(sc.Bytes(), &q); err != nil {
			answer = err.Error()
		} else if a, err := st.query(q); err != nil {
			answer = err.Error()
		} else if a != nil {
			b, _ := json.Marshal(a)
			answer = string(b)
		}
		if _, err := fmt.Fprintln(out, answer); err != nil {
			return err
		}
	}
	return sc.Err()
}

// query answers q: nil for "ok", the streamResult of a "go".
func (st *streamer) query(q streamQuery) (*streamResult, error) {
	st.mu.Lock()
	r := st.run
	st.mu.Unlock()
	switch q.Op {
	case "arm":
		if q.Streams <= 0 || q.Duration <= 0 {
			return nil, fmt.Errorf("arm: %d streams for %v", q.Streams, q.Duration)
		}
		r := &streamRun{q: q, allOpen: make(chan struct{}), start: make(chan struct{}), sent: make([]int64, q.Streams), claimed: make([]bool, q.Streams)}
		st.mu.Lock()
		st.run = r
		st.mu.Unlock()
		return nil, nil
	case "opened":
		if r == nil {
			return nil, errors.New("opened: no run armed")
		}
		select {
		case <-r.allOpen:
			return nil, nil
		case <-time.After(time.Minute): // a guard, not a synchronisation
			r.mu.Lock()
			n := r.opened
			r.mu.Unlock()
			return nil, fmt.Errorf("opened: %d of %d streams open after a minute", n, q.Streams)
		}
	case "go":
		if r == nil {
			return nil, errors.New("go: no run armed")
		}
		r.t0 = time.Now()
		r.end = r.t0.Add(r.q.Duration)
		close(r.start)
		r.wg.Wait()
		st.mu.Lock()
		st.run = nil
		st.mu.Unlock()
		s := summarise(r.took, 0, "", 0)
		return &streamResult{Sent: r.sent, Errors: r.errs.n.Load(), FirstErr: r.errs.firstErr(), Start: r.t0, End: time.Now(),
			Behind: r.behind, SendP50: s.P50, SendP99: s.P99}, nil
	}
	return nil, fmt.Errorf("unknown op %q", q.Op)
}

// serve is the stream handler: a stream of the armed run, sending on its
// schedule once the run goes.
func (st *streamer) serve(ctx context.Context, s *wizard.ServerStream[wizard.Request, any]) error {
	req, err := s.Recv()
	if err != nil {
		return err
	}
	cs, _ := req.String("c")
	c, err := strconv.Atoi(cs)
	st.mu.Lock()
	r := st.run
	st.mu.Unlock()
	if r == nil {
		return nil // the probe
	}
	if err != nil || c < 0 || c >= r.q.Streams {
		return wizard.Errorf(wizard.CodeInvalidArgument, "stream of client %q: want 0 to %d", cs, r.q.Streams-1)
	}
	r.mu.Lock()
	if r.claimed[c] {
		r.mu.Unlock()
		return wizard.Errorf(wizard.CodeAlreadyExists, "client %d has a stream open already", c)
	}
	r.claimed[c] = true
	r.wg.Add(1) // before opened reaches Streams: go's Wait counts it
	defer r.wg.Done()
	r.opened++
	if r.opened == r.q.Streams {
		close(r.allOpen)
	}
	r.mu.Unlock()
	select {
	case <-r.start:
	case <-ctx.Done():
		r.errs.add(fmt.Errorf("stream %d: ended before the run's start: %w", c, ctx.Err()))
		return ctx.Err()
	}
	var interval, offset time.Duration
	if r.q.Rate > 0 {
		interval = time.Duration(float64(time.Second) / r.q.Rate)
		offset = interval * time.Duration(c) / time.Duration(r.q.Streams)
	}
	var (
		sent int64
		lag  time.Duration
		took = make([]time.Duration, 0, 1024)
	)
	defer func() {
		r.mu.Lock()
		r.sent[c] = sent
		r.took = append(r.took, took...)
		r.behind = max(r.behind, lag)
		r.mu.Unlock()
	}()
	for i := int64(0); ; i++ {
		if interval > 0 {
			due := r.t0.Add(offset + time.Duration(i)*interval)
			if !due.Before(r.end) {
				return nil
			}
			if d := time.Until(due); d > 0 {
				time.Sleep(d) // the offered schedule, not a synchronisation
			} else {
				lag = max(lag, -d)
			}
		} else if !time.Now().Before(r.end) {
			return nil
		}
		now := time.Now()
		// A new buffer per message: Send may still hold the last one.
		msg := append(make([]byte, 0, 48), `{"seq":`...)
		msg = strconv.AppendInt(msg, i, 10)
		msg = append(msg, `,"t":`...)
		msg = strconv.AppendInt(msg, now.UnixNano(), 10)
		msg = append(msg, '}')
		if err := s.Send(json.RawMessage(msg)); err != nil {
			r.errs.add(fmt.Errorf("stream %d, message %d: %w", c, i, err))
			return err
		}
		took = append(took, time.Since(now))
		sent++
	}
}
