//go:build linux

package podsim_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/coder/websocket"
)

// wsSpec is what the WebSocket clients' process is to be.
type wsSpec struct {
	URL     string // the Service's WebSocket URL
	Dir     string // where it writes wsclients.json
	Clients int
	Period  time.Duration // each client's time between calls
}

// wsReport is what the WebSocket clients' process writes at exit.
type wsReport struct {
	Start int64 // unix nanoseconds of the load's start
	// OK: requests answered 200; Retried: answered 503 (the gateway
	// drains), then sent again with the same key; AtClose: unanswered
	// when the gateway closed their connection with 1012 (it drained: a
	// request it has not answered it has not run), sent again with the
	// same key on the next connection; Failed: answered any other
	// status, by status and code; Lost: in flight when their connection
	// ended otherwise, neither answered nor refused.
	OK, Retried, AtClose, Lost int
	Failed                     map[string]int
	// Unresolved: keys answered 503 whose retry was still unanswered
	// when the load stopped.
	Unresolved int
	OKKeys     []string
	// Dials: connections made; Reconnects: of those, the ones that
	// replaced a connection the gateway closed; DialErrors: failed
	// dials. Closes: the close codes the clients were given.
	Dials, Reconnects, DialErrors int
	Closes                        map[string]int
	// MaxReconnect: the longest time from a close to the next
	// connection of the same client.
	MaxReconnect time.Duration
	Failures     []failure // the first maxFailures, Kind once
}

// wsLoad keeps the clients' counts.
type wsLoad struct {
	spec wsSpec
	mu   sync.Mutex
	rep  wsReport
}

// runWSClients is the WebSocket clients' process: spec.Clients clients,
// each connected through the Service and calling POST /api/podsim/once
// (one request in flight) every spec.Period with a key of its own; when
// the gateway closes a connection a client reconnects at once. It prints
// "ready" once every client has connected, and writes wsclients.json
// after SIGTERM.
func runWSClients(spec wsSpec) error {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	l := &wsLoad{spec: spec, rep: wsReport{Start: time.Now().UnixNano(), Failed: map[string]int{}, Closes: map[string]int{}}}
	ctx, stopLoad := context.WithCancel(context.Background())
	defer stopLoad()
	var wg, connected sync.WaitGroup
	connected.Add(spec.Clients)
	for i := range spec.Clients {
		wg.Go(func() { l.client(ctx, i, connected.Done) })
	}
	up := make(chan struct{})
	go func() { connected.Wait(); close(up) }()
	select {
	case <-up:
		fmt.Println("ready")
	case <-time.After(time.Minute):
		return fmt.Errorf("wsclients: not every client connected after a minute")
	}
	<-stop
	stopLoad()
	wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	b, err := json.Marshal(l.rep)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(spec.Dir, "wsclients.json"), b, 0o644)
}

// wsFrame is a frame of the gateway's WebSocket protocol, both ways.
type wsFrame struct {
	Type         string         `json:"type"`
	ID           string         `json:"id,omitempty"`
	Method       string         `json:"method,omitempty"`
	Path         string         `json:"path,omitempty"`
	Body         map[string]any `json:"body,omitempty"`
	Status       int            `json:"status,omitempty"`
	RetryAfterMs int64          `json:"retry_after_ms,omitempty"`
	Error        *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error,omitempty"`
}

// client is one WebSocket client until ctx ends; connected is called
// once, at its first connection. After ctx ends it still retries a key
// answered 503, for up to 5 s.
func (l *wsLoad) client(ctx context.Context, i int, connected func()) {
	var (
		first  = true
		closed time.Time // when the gateway last closed its connection
		seq    int
		retry  string // a key answered 503, to send again
	)
	stopped := func() bool { return ctx.Err() != nil && retry == "" }
	var finish <-chan time.Time // armed when ctx ends
	for !stopped() {
		if ctx.Err() != nil && finish == nil {
			finish = time.After(5 * time.Second)
		}
		dctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		c, _, err := websocket.Dial(dctx, l.spec.URL, nil)
		cancel()
		if err != nil {
			l.count(func(r *wsReport) { r.DialErrors++ })
			time.Sleep(100 * time.Millisecond) // a client's backoff, not a test's wait
			continue
		}
		l.count(func(r *wsReport) {
			r.Dials++
			if !closed.IsZero() {
				r.Reconnects++
				r.MaxReconnect = max(r.MaxReconnect, time.Since(closed))
			}
		})
		if first {
			first = false
			connected()
		}
		frames := make(chan wsFrame)
		readErr := make(chan error, 1)
		go func() {
			for {
				_, b, err := c.Read(context.Background())
				if err != nil {
					readErr <- err
					return
				}
				var f wsFrame
				if json.Unmarshal(b, &f) == nil && f.Type == "res" {
					frames <- f
				}
			}
		}()
		// A random phase, so that the clients' calls spread over the period.
		pace := time.NewTimer(rand.N(l.spec.Period))
	conn:
		for {
			select {
			case <-pace.C:
			case <-ctx.Done():
				if retry == "" {
					c.Close(websocket.StatusNormalClosure, "")
					<-readErr
					return
				}
			case err := <-readErr:
				l.closedBy(err)
				closed = time.Now()
				break conn
			}
			pace.Reset(l.spec.Period)
			key := retry
			if key == "" {
				key = fmt.Sprintf("ws-%d-%d", i, seq)
				seq++
			}
			b, _ := json.Marshal(wsFrame{Type: "req", ID: key, Method: "POST", Path: "/api/podsim/once", Body: map[string]any{"key": key}})
			began := time.Now()
			if err := c.Write(context.Background(), websocket.MessageText, b); err != nil {
				// Not sent whole, or the connection closed: the reader
				// tells which; the key is sent again (it did not reach
				// the gateway, or reached a closing one, which refuses it).
				retry = key
				continue
			}
			select {
			case f := <-frames:
				retry = l.answered(key, began, f)
			case err := <-readErr:
				l.closedBy(err)
				closed = time.Now()
				if websocket.CloseStatus(err) == websocket.StatusServiceRestart {
					// A draining gateway answers every request it runs
					// before its close frame: this one crossed it, unrun.
					l.count(func(r *wsReport) { r.AtClose++ })
					retry = key
					break conn
				}
				l.count(func(r *wsReport) {
					r.Lost++
					r.addFailure(key, began, "lost", "in flight when the connection closed: "+err.Error())
				})
				retry = "" // neither answered nor refused: not sent again
				break conn
			case <-finish:
				c.CloseNow()
				l.count(func(r *wsReport) { r.Unresolved++ })
				return
			}
		}
		c.CloseNow()
		if finish != nil {
			select {
			case <-finish:
				if retry != "" {
					l.count(func(r *wsReport) { r.Unresolved++ })
				}
				return
			default:
			}
		}
	}
}

// answered counts a res frame for key and returns the key to send again,
// or "".
func (l *wsLoad) answered(key string, began time.Time, f wsFrame) string {
	switch {
	case f.Status == 200:
		l.count(func(r *wsReport) { r.OK++; r.OKKeys = append(r.OKKeys, key) })
		return ""
	case f.Status == 503 && f.Error != nil && f.Error.Code == "unavailable":
		l.count(func(r *wsReport) { r.Retried++ })
		return key
	default:
		code := ""
		if f.Error != nil {
			code = f.Error.Code
		}
		l.count(func(r *wsReport) {
			name := fmt.Sprintf("%d %s", f.Status, code)
			r.Failed[name]++
			msg := ""
			if f.Error != nil {
				msg = f.Error.Message
			}
			r.addFailure(key, began, name, msg)
		})
		return ""
	}
}

// closedBy counts the close code of a connection the gateway ended.
func (l *wsLoad) closedBy(err error) {
	code := websocket.CloseStatus(err)
	name := fmt.Sprint(int(code))
	if code == -1 {
		name = "no close frame"
		if errors.Is(err, context.Canceled) {
			name = "canceled"
		}
	}
	l.count(func(r *wsReport) { r.Closes[name]++ })
}

func (l *wsLoad) count(f func(r *wsReport)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f(&l.rep)
}

func (r *wsReport) addFailure(key string, began time.Time, code, msg string) {
	if len(r.Failures) < maxFailures {
		r.Failures = append(r.Failures, failure{Kind: once, Key: key, Began: began.UnixNano(), Ended: time.Now().UnixNano(), Code: code, Err: msg})
	}
}
