package runtime_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
)

func TestTimeout(t *testing.T) {
	n := newTestNode(t)
	type deadline struct {
		t  time.Time
		ok bool
	}
	got := make(chan deadline, 1)
	mustAdd(t, n, "to:1", func(ctx context.Context, r runtime.Request) (any, error) {
		d, ok := ctx.Deadline()
		got <- deadline{d, ok}
		return nil, nil
	})

	t.Run("no caller deadline", func(t *testing.T) {
		start := time.Now()
		if _, err := n.Act(t.Context(), "to:1", nil, runtime.Timeout(time.Hour)); err != nil {
			t.Fatal(err)
		}
		d := <-got
		if !d.ok || d.t.Before(start.Add(time.Hour)) || d.t.After(time.Now().Add(time.Hour)) {
			t.Errorf("handler deadline = %v (%v), want about an hour from now", d.t, d.ok)
		}
	})

	t.Run("earlier caller deadline wins", func(t *testing.T) {
		want := time.Now().Add(10 * time.Minute)
		ctx, cancel := context.WithDeadline(t.Context(), want)
		defer cancel()
		if _, err := n.ActE(ctx, "to:1", nil, runtime.Timeout(time.Hour)); err != nil {
			t.Fatal(err)
		}
		if d := <-got; !d.ok || !d.t.Equal(want) {
			t.Errorf("handler deadline = %v (%v), want the caller's %v", d.t, d.ok, want)
		}
	})

	t.Run("later caller deadline is bounded by Timeout", func(t *testing.T) {
		ctx, cancel := context.WithDeadline(t.Context(), time.Now().Add(10*time.Hour))
		defer cancel()
		if _, err := n.ActE(ctx, "to:1", nil, runtime.Timeout(time.Hour)); err != nil {
			t.Fatal(err)
		}
		if d := <-got; !d.ok || d.t.After(time.Now().Add(time.Hour)) {
			t.Errorf("handler deadline = %v (%v), want within the hour", d.t, d.ok)
		}
	})

	t.Run("client option", func(t *testing.T) {
		start := time.Now()
		c := newClient[point, point](t, n, "to:1", runtime.Timeout(time.Hour))
		if _, err := c.Call(t.Context(), &point{}); err != nil {
			t.Fatal(err)
		}
		if d := <-got; !d.ok || d.t.Before(start.Add(time.Hour)) {
			t.Errorf("handler deadline = %v (%v), want about an hour from now", d.t, d.ok)
		}
	})

	t.Run("no-reply handlers are bounded too", func(t *testing.T) {
		start := time.Now()
		if _, err := n.ActE(t.Context(), "to:1", nil, runtime.Timeout(time.Hour), runtime.NoReply()); err != nil {
			t.Fatal(err)
		}
		if d := testwait.Recv(t, got); !d.ok || d.t.Before(start.Add(time.Hour)) {
			t.Errorf("no-reply handler deadline = %v (%v), want about an hour from now", d.t, d.ok)
		}
	})

	t.Run("expiry reaches the handler and the caller", func(t *testing.T) {
		mustAdd(t, n, "to:wait", func(ctx context.Context, r runtime.Request) (any, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		})
		_, err := n.Act(t.Context(), "to:wait", nil, runtime.Timeout(time.Millisecond))
		wantCode(t, err, runtime.CodeDeadlineExceeded)
		if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, runtime.ErrDeadlineExceeded) {
			t.Errorf("errors.Is(%v, DeadlineExceeded) = false", err)
		}
	})
}
