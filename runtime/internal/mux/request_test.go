package mux

import (
	"context"
	"runtime"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
	"github.com/wizardmesh/wizard/runtime/internal/wire"
)

type ctxKey struct{}

func newTestRequest(deadline time.Duration) *request {
	s := &server{base: context.WithValue(context.Background(), ctxKey{}, "v")}
	r := &request{frame: wire.Frame{Type: wire.TypeRequest, Pattern: "a:1"}, s: s}
	if deadline > 0 {
		r.deadline = time.Now().Add(deadline)
	}
	return r
}

func TestRequestContextDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newTestRequest(time.Second)
		if dl, ok := r.Deadline(); !ok || dl != time.Now().Add(time.Second) {
			t.Errorf("Deadline() = %v, %v", dl, ok)
		}
		done := r.Done()
		select {
		case <-done:
			t.Fatal("Done closed before the deadline")
		default:
		}
		if err := r.Err(); err != nil {
			t.Fatalf("Err() = %v before the deadline", err)
		}
		start := time.Now()
		<-done
		if d := time.Since(start); d != time.Second {
			t.Errorf("Done closed after %v, want 1s", d)
		}
		if err := r.Err(); err != context.DeadlineExceeded {
			t.Errorf("Err() = %v, want DeadlineExceeded", err)
		}
		r.cancel(context.Canceled) // too late: the first end stays
		if err := r.Err(); err != context.DeadlineExceeded {
			t.Errorf("Err() after cancel = %v, want DeadlineExceeded", err)
		}
	})
}

func TestRequestContextLazy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Without Done, no timer: Err still sees the deadline pass.
		r := newTestRequest(time.Second)
		time.Sleep(2 * time.Second)
		if r.timer != nil || r.done != nil {
			t.Error("a timer or channel was made though nobody asked for Done")
		}
		if err := r.Err(); err != context.DeadlineExceeded {
			t.Errorf("Err() = %v, want DeadlineExceeded", err)
		}
		select {
		case <-r.Done():
		default:
			t.Error("Done not closed after the deadline")
		}

		// No deadline: nothing ends it but cancel.
		r = newTestRequest(0)
		if _, ok := r.Deadline(); ok {
			t.Error("Deadline() reports one")
		}
		done := r.Done()
		time.Sleep(time.Hour)
		if r.Err() != nil {
			t.Error("ended without a deadline or cancel")
		}
		r.cancel(context.Canceled)
		<-done
		if err := r.Err(); err != context.Canceled {
			t.Errorf("Err() = %v, want Canceled", err)
		}
	})
}

func TestRequestContextValue(t *testing.T) {
	r := newTestRequest(0)
	if v := r.Value(ctxKey{}); v != "v" {
		t.Errorf("Value = %v, want Serve's ctx value", v)
	}
	if got := context.Cause(r); got != nil {
		t.Errorf("Cause = %v", got)
	}
	r.cancel(context.Canceled)
	if got := context.Cause(r); got != context.Canceled {
		t.Errorf("Cause = %v", got)
	}
}

func TestRequestContextDerived(t *testing.T) {
	// context.WithCancel and friends use our AfterFunc, not a goroutine
	// per derived context.
	r := newTestRequest(time.Hour)
	before := runtime.NumGoroutine()
	child, cancel := context.WithTimeout(r, 2*time.Hour)
	defer cancel()
	grand, cancel2 := context.WithCancel(child)
	defer cancel2()
	// More, not other: a goroutine of an earlier test may end meanwhile.
	if n := runtime.NumGoroutine(); n > before {
		t.Errorf("deriving contexts started %d goroutines", n-before)
	}
	if dl, _ := child.Deadline(); dl != r.deadline {
		t.Errorf("child deadline %v, want the request's %v", dl, r.deadline)
	}
	r.cancel(context.Canceled)
	select {
	case <-grand.Done():
	case <-time.After(testwait.Guard):
		t.Fatal("a grandchild context did not end with the request")
	}
	if grand.Err() != context.Canceled {
		t.Errorf("grandchild Err() = %v", grand.Err())
	}
}

func TestRequestContextAfterFunc(t *testing.T) {
	r := newTestRequest(0)
	ran := make(chan string, 2)
	stop1 := context.AfterFunc(r, func() { ran <- "first" })
	stop2 := context.AfterFunc(r, func() { ran <- "second" })
	if !stop2() {
		t.Error("stop before the end returned false")
	}
	if stop2() {
		t.Error("second stop returned true")
	}
	r.cancel(context.Canceled)
	if got := testwait.Recv(t, ran); got != "first" {
		t.Errorf("ran %q", got)
	}
	if stop1() {
		t.Error("stop after the function ran returned true")
	}
	// After the end, AfterFunc runs f at once.
	context.AfterFunc(r, func() { ran <- "late" })
	if got := testwait.Recv(t, ran); got != "late" {
		t.Errorf("ran %q", got)
	}
	if len(ran) != 0 {
		t.Errorf("a stopped function ran")
	}
}
