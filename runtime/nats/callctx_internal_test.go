package nats

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// TestCallCtx: a call's context ends with its deadline, the caller's
// cancel or the listener's close, whether or not its Done was asked for
// first; contexts derived from it end with it.
func TestCallCtx(t *testing.T) {
	cases := []struct {
		name string
		arm  bool                               // ask for Done first
		end  func(c *callCtx, closeBase func()) // what ends it
		want error
	}{
		{"deadline", false, func(*callCtx, func()) { time.Sleep(2 * time.Second) }, context.DeadlineExceeded},
		{"deadline, armed", true, func(*callCtx, func()) { time.Sleep(2 * time.Second) }, context.DeadlineExceeded},
		{"cancel", false, func(c *callCtx, _ func()) { c.cancel(context.Canceled) }, context.Canceled},
		{"cancel, armed", true, func(c *callCtx, _ func()) { c.cancel(context.Canceled) }, context.Canceled},
		{"listener closed", false, func(_ *callCtx, closeBase func()) { closeBase() }, context.Canceled},
		{"listener closed, armed", true, func(_ *callCtx, closeBase func()) { closeBase() }, context.Canceled},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base, closeBase := context.WithCancel(context.Background())
				defer closeBase()
				c := &callCtx{base: base, vals: context.WithoutCancel(base), end: time.Now().Add(time.Second)}
				if dl, ok := c.Deadline(); !ok || !dl.Equal(c.end) {
					t.Fatalf("Deadline() = %v, %v", dl, ok)
				}
				if c.Err() != nil {
					t.Fatalf("Err() = %v before it ended", c.Err())
				}
				derived := context.Context(c)
				if tc.arm {
					select {
					case <-c.Done():
						t.Fatal("Done closed before it ended")
					default:
					}
					// Made with Done: by its AfterFunc, no goroutine.
					var cancelDerived context.CancelFunc
					derived, cancelDerived = context.WithCancel(c)
					defer cancelDerived()
				}
				tc.end(c, closeBase)
				synctest.Wait()
				if err := c.Err(); !errors.Is(err, tc.want) {
					t.Fatalf("Err() = %v, want %v", err, tc.want)
				}
				if err := context.Cause(c); !errors.Is(err, tc.want) {
					t.Errorf("context.Cause = %v, want %v (not the listener's)", err, tc.want)
				}
				if err := context.Cause(derived); !errors.Is(err, tc.want) {
					t.Errorf("context.Cause of a derived context = %v, want %v", err, tc.want)
				}
				select {
				case <-c.Done():
				default:
					t.Fatal("Done not closed once it ended")
				}
				select {
				case <-derived.Done():
				default:
					t.Fatal("a derived context did not end with it")
				}
				c.cancel(errors.New("later")) // no effect once ended
				if err := c.Err(); !errors.Is(err, tc.want) {
					t.Fatalf("Err() = %v after a second end, want %v", err, tc.want)
				}
			})
		})
	}
}

// TestCallCtx_Release: a context ended by its handler's return leaves no
// timer and no registration with the listener's context behind.
func TestCallCtx_Release(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base, closeBase := context.WithCancel(context.Background())
		defer closeBase()
		c := &callCtx{base: base, vals: context.WithoutCancel(base), end: time.Now().Add(time.Hour)}
		fired := make(chan struct{}, 1)
		stop := context.AfterFunc(c, func() { fired <- struct{}{} })
		if !stop() {
			t.Fatal("stop of an AfterFunc not run reports false")
		}
		<-c.Done()
		c.cancel(context.Canceled)
		if c.stopBase() {
			t.Error("the registration with the listener's context is still there")
		}
		if c.timer.Stop() {
			t.Error("the deadline's timer is still running")
		}
		synctest.Wait()
		select {
		case <-fired:
			t.Error("a stopped AfterFunc ran")
		default:
		}
	})
}
