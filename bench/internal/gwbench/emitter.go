package gwbench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	wizard "github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/tcp"
)

// roleEmitter is a wizard node over TCP that emits the event push
// scenario's events when asked: the mesh service whose events
// wizard-gateway pushes to its WebSocket subscribers.
const roleEmitter = "wizard-emitter"

// emitRun is a query of the emitter: one line of JSON on its stdin. It
// waits until the subscriptions of the patterns are in its catalog, then
// emits for Duration and answers with an emitResult line.
//
// Broadcast: event i is Pattern with the message {"seq":i,"t":T}. Per
// user (Users > 0): event i goes to user i%Users, Pattern with the pair
// user:user-<i%Users> added, its seq i/Users (each user's own count).
// T is the wall clock (Unix nanoseconds) just before the emit: the
// clients read the same clock on the same machine.
type emitRun struct {
	Pattern  string        `json:"pattern"`
	Users    int           `json:"users,omitempty"`
	Rate     float64       `json:"rate"`     // events/s offered (0: as fast as acknowledged emits go, Inflight at a time)
	Inflight int           `json:"inflight"` // emits in flight at most
	Duration time.Duration `json:"duration"`
}

// emitResult is the emitter's answer: how many events it emitted (every
// index below Emitted was emitted, acknowledged or failed), how many
// failed, and the emits' time.
type emitResult struct {
	Emitted  int64         `json:"emitted"`
	Errors   int64         `json:"errors"`
	FirstErr string        `json:"first_err,omitempty"`
	Start    time.Time     `json:"start"`    // the first emit
	End      time.Time     `json:"end"`      // the last emit acknowledged
	Behind   time.Duration `json:"behind"`   // the largest lag of an emit behind its schedule
	EmitP50  time.Duration `json:"emit_p50"` // an acknowledged emit's duration
	EmitP99  time.Duration `json:"emit_p99"`
	Err      string        `json:"err,omitempty"` // the run could not start
}

// serveEmitter serves roleEmitter: a node joined to the gateway's node
// at s.Upstream (it learns the gateway's subscriptions from it), its id
// on out, then one emitResult line for each emitRun line of in.
func serveEmitter(s childSpec, in io.Reader, out io.Writer) error {
	t, err := tcp.New()
	if err != nil {
		return err
	}
	// Its warnings (a lost connection to the gateway's node, say) on
	// stderr, which the benchmark passes on: they explain emit errors.
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})).With("process", roleEmitter)
	node, err := wizard.New(wizard.WithTransport(t), wizard.WithDiscovery(wizard.StaticPeers(s.Upstream)), wizard.WithLogger(log))
	if err != nil {
		return err
	}
	defer node.Close()
	if _, err := fmt.Fprintln(out, node.ID()); err != nil {
		return err
	}
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		var q emitRun
		var res emitResult
		if err := json.Unmarshal(sc.Bytes(), &q); err != nil {
			res.Err = err.Error()
		} else {
			res = emit(node, q)
		}
		b, _ := json.Marshal(res)
		if _, err := fmt.Fprintf(out, "%s\n", b); err != nil {
			return err
		}
	}
	return sc.Err()
}

// userPattern is a per-user event's pattern.
func userPattern(base string, user int) string {
	return base + ",user:" + userName(user)
}

func userName(i int) string { return "user-" + strconv.Itoa(i) }

// emit runs q on node.
func emit(node *wizard.Node, q emitRun) emitResult {
	var res emitResult
	wctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var err error
	if q.Users == 0 {
		err = node.WaitForSubscribers(wctx, q.Pattern)
	}
	for u := 0; u < q.Users && err == nil; u++ {
		err = node.WaitForSubscribers(wctx, userPattern(q.Pattern, u))
	}
	if err != nil {
		res.Err = "waiting for the gateway's subscriptions: " + err.Error()
		return res
	}
	inflight := max(q.Inflight, 1)
	var (
		next   atomic.Int64
		errs   errCount
		mu     sync.Mutex
		behind time.Duration
		took   = make([][]time.Duration, inflight)
		wg     sync.WaitGroup
	)
	start := time.Now()
	end := start.Add(q.Duration)
	ctx, cancelRun := context.WithDeadline(context.Background(), end.Add(time.Minute))
	defer cancelRun()
	var interval time.Duration
	if q.Rate > 0 {
		interval = time.Duration(float64(time.Second) / q.Rate)
	}
	for w := range inflight {
		wg.Go(func() {
			mine := make([]time.Duration, 0, 1024)
			var lag time.Duration
			defer func() {
				took[w] = mine
				mu.Lock()
				behind = max(behind, lag)
				mu.Unlock()
			}()
			var msg []byte
			for {
				// Every index taken is emitted, so the events emitted are
				// exactly the indices below their count.
				if interval == 0 && !time.Now().Before(end) {
					return
				}
				i := next.Add(1) - 1
				if interval > 0 {
					due := start.Add(time.Duration(i) * interval)
					if !due.Before(end) {
						return // and so is every later index
					}
					if d := time.Until(due); d > 0 {
						time.Sleep(d) // the offered schedule, not a synchronisation
					} else {
						lag = max(lag, -d)
					}
				}
				now := time.Now()
				pat, seq := q.Pattern, i
				if q.Users > 0 {
					pat, seq = userPattern(q.Pattern, int(i%int64(q.Users))), i/int64(q.Users)
				}
				msg = append(msg[:0], `{"seq":`...)
				msg = strconv.AppendInt(msg, seq, 10)
				msg = append(msg, `,"t":`...)
				msg = strconv.AppendInt(msg, now.UnixNano(), 10)
				msg = append(msg, '}')
				_, err := node.Emit(ctx, pat, msg)
				if err != nil {
					errs.add(fmt.Errorf("event %d (%s): %w", i, pat, err))
				} else {
					mine = append(mine, time.Since(now))
				}
			}
		})
	}
	wg.Wait()
	var all []time.Duration
	for _, t := range took {
		all = append(all, t...)
	}
	res.Emitted = int64(len(all)) + errs.n.Load()
	res.Errors = errs.n.Load()
	res.FirstErr = errs.firstErr()
	res.Start, res.End, res.Behind = start, time.Now(), behind
	s := summarise(all, 0, "", 0)
	res.EmitP50, res.EmitP99 = s.P50, s.P99
	return res
}
