package gateway

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"
)

func TestLimiterBucket(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(rateSpec{rate: 10, burst: 3}, 0)
		for i := range 3 {
			if ok, _ := l.allow("a"); !ok {
				t.Fatalf("call %d of the burst refused", i)
			}
		}
		ok, wait := l.allow("a")
		if ok || wait != 100*time.Millisecond {
			t.Fatalf("past the burst: %v, wait %v; want refused, 100ms", ok, wait)
		}
		if ok, _ := l.allow("b"); !ok {
			t.Fatal("another key shares the bucket")
		}
		time.Sleep(50 * time.Millisecond)
		if ok, wait := l.allow("a"); ok || wait != 50*time.Millisecond {
			t.Fatalf("half a token later: %v, wait %v; want refused, 50ms", ok, wait)
		}
		time.Sleep(50 * time.Millisecond)
		if ok, _ := l.allow("a"); !ok {
			t.Fatal("a token later: refused")
		}
		time.Sleep(time.Hour)
		for i := range 3 {
			if ok, _ := l.allow("a"); !ok {
				t.Fatalf("after an hour, call %d refused: the bucket holds more than its burst?", i)
			}
		}
		if ok, _ := l.allow("a"); ok {
			t.Fatal("the bucket refilled past its burst")
		}
	})
}

func TestLimiterTableBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(rateSpec{rate: 1, burst: 2}, 4)
		for i := range 100 {
			l.allow(fmt.Sprint("k", i))
			if n := l.len(); n > 4 {
				t.Fatalf("%d keys held, bound 4", n)
			}
		}
		// A key that used its burst keeps its bucket while refilled ones
		// make room.
		l = newLimiter(rateSpec{rate: 1, burst: 2}, 2)
		l.allow("busy")
		l.allow("busy")
		l.allow("idle")
		time.Sleep(time.Second) // idle refills; busy has 1 of 2
		l.allow("new")
		if ok, _ := l.allow("busy"); !ok {
			t.Fatal("busy's bucket was dropped")
		}
		if ok, _ := l.allow("busy"); ok {
			t.Fatal("busy's bucket was dropped: a fresh burst")
		}
	})
}

func TestLimiterNil(t *testing.T) {
	if l := newLimiter(rateSpec{}, 0); l != nil {
		t.Fatal("a zero rate makes a limiter")
	}
	var l *limiter
	if ok, _ := l.allow("x"); !ok {
		t.Fatal("the nil limiter refuses")
	}
	for _, tc := range []struct {
		d    time.Duration
		want int
	}{{0, 1}, {time.Millisecond, 1}, {time.Second, 1}, {1001 * time.Millisecond, 2}} {
		if got := retrySeconds(tc.d); got != tc.want {
			t.Errorf("retrySeconds(%v) = %d, want %d", tc.d, got, tc.want)
		}
	}
}

// TestRateLimitPerIP: past the per-IP burst, 429 with Retry-After over
// HTTP, and a 429 frame over WebSocket (the connection stays).
func TestRateLimitPerIP(t *testing.T) {
	tg := newTestGateway(t, settings{perIP: rateSpec{rate: 0.001, burst: 3}})
	for range 2 {
		if got := doHTTP(t, tg, statusCase{method: "GET", path: "/echo"}); got.status != 200 {
			t.Fatalf("within the burst: %d", got.status)
		}
	}
	c := dialWS(t, tg.ws, nil) // the upgrade takes the third token
	got := doHTTP(t, tg, statusCase{method: "GET", path: "/echo"})
	if got.status != 429 || got.code != "resource_exhausted" || got.header.Get("Retry-After") == "" {
		t.Errorf("past the burst: %d %q Retry-After %q", got.status, got.code, got.header.Get("Retry-After"))
	}
	sendFrame(t, c, map[string]any{"type": "req", "id": "1", "method": "GET", "path": "/echo"})
	if f := mustReadFrame(t, c); f.Status != 429 {
		t.Errorf("frame past the burst: %+v", f)
	}
	sendRaw(t, c, []byte(`{}`))
	mustReadFrame(t, c)
}
