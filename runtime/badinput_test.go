package runtime_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testlog"
	"github.com/wizardmesh/wizard/runtime/pattern"
)

func TestBadInput(t *testing.T) {
	t.Run("invalid patterns", func(t *testing.T) {
		n := newTestNode(t)
		bad := []string{"a", "a:1,a:2", ":1", "a:1,", "a:1,,b:2", `a:"x`, "a:b:c", `"a":1`, "a b:1", "a:"}
		for _, p := range bad {
			calls := map[string]func() error{
				"Add":    func() error { return n.Add(p, replyMsg(1)) },
				"Act":    func() error { _, err := n.Act(t.Context(), p, nil); return err },
				"ActE":   func() error { _, err := n.ActE(t.Context(), p, nil); return err },
				"Remove": func() error { _, err := n.Remove(p); return err },
				"NewClient": func() error {
					_, err := runtime.NewClient[point, point](n, p)
					return err
				},
			}
			for name, call := range calls {
				t.Run(fmt.Sprintf("%s(%q)", name, p), func(t *testing.T) {
					err := call()
					var perr *pattern.ParseError
					if !errors.As(err, &perr) {
						t.Fatalf("err = %v (%T), want a *ParseError", err, err)
					}
					if code := runtime.CodeOf(err); code != runtime.CodeInvalidArgument {
						t.Errorf("CodeOf(%v) = %v, want invalid_argument", err, code)
					}
					if perr.Pattern != p || perr.Pos < 0 || perr.Pos > len(p) || perr.Reason == "" {
						t.Errorf("ParseError = %+v: want the input, a position within it and a reason", perr)
					}
				})
			}
		}
		if len(n.Patterns()) != 0 {
			t.Errorf("Patterns() = %v after failed Adds", n.Patterns())
		}
	})

	t.Run("unsupported message types", func(t *testing.T) {
		n := newTestNode(t)
		var ran atomic.Bool
		mustAdd(t, n, "", func(context.Context, runtime.Request) (any, error) { ran.Store(true); return nil, nil })
		msgs := []any{point{X: 1}, &point{}, 42, "a:1", make(chan int), []int{1}, map[string]int{"a": 1}, func() {}}
		for _, msg := range msgs {
			typ := fmt.Sprintf("%T", msg)
			t.Run(typ, func(t *testing.T) {
				_, err := n.Act(t.Context(), "a:1", msg)
				wantCode(t, err, runtime.CodeInvalidArgument)
				if !errors.Is(err, runtime.ErrInvalidArgument) || !strings.Contains(err.Error(), typ) {
					t.Errorf("error %q does not name the type %s", err, typ)
				}
				// ActE takes any data, but a Mixin must read it.
				_, err = n.ActE(t.Context(), "a:1", msg, runtime.Mixin("b"))
				wantCode(t, err, runtime.CodeInvalidArgument)
				if !strings.Contains(err.Error(), typ) {
					t.Errorf("ActE Mixin error %q does not name the type %s", err, typ)
				}
			})
		}
		if ran.Load() {
			t.Error("a handler ran for an unsupported message")
		}
	})

	t.Run("invalid JSON", func(t *testing.T) {
		n := newTestNode(t)
		mustAdd(t, n, "", replyMsg(nil))
		msgs := map[string]any{
			"truncated":       []byte(`{"a":`),
			"array":           []byte(`[1, 2]`),
			"string":          []byte(`"a"`),
			"number":          json.RawMessage(`12`),
			"trailing data":   []byte(`{"a": 1} {"b": 2}`),
			"trailing ]":      []byte(`{"a": 1}]`),
			"not JSON at all": json.RawMessage(`role:x`),
		}
		for name, msg := range msgs {
			t.Run(name, func(t *testing.T) {
				_, err := n.Act(t.Context(), "a:1", msg)
				wantCode(t, err, runtime.CodeInvalidArgument)
				if !strings.Contains(err.Error(), "JSON") {
					t.Errorf("error %q does not say the JSON is bad", err)
				}
				_, err = n.ActE(t.Context(), "a:1", msg, runtime.Mixin("b"))
				wantCode(t, err, runtime.CodeInvalidArgument)
			})
		}
		// Empty JSON and the JSON null are empty messages.
		for _, msg := range []any{[]byte(nil), []byte("  "), []byte("null"), json.RawMessage("{}")} {
			if _, err := n.Act(t.Context(), "a:1", msg); err != nil {
				t.Errorf("Act(%q): %v", msg, err)
			}
		}
	})

	t.Run("nil handlers", func(t *testing.T) {
		n := newTestNode(t)
		handlers := map[string]runtime.Handler{
			"nil":                   nil,
			"NewUnaryHandler(nil)":  runtime.NewUnaryHandler[point, point](nil),
			"NewUnaryHandler(nil)2": runtime.NewUnaryHandler[map[string]any, string](nil),
		}
		for name, h := range handlers {
			t.Run(name, func(t *testing.T) {
				err := n.Add("nh:1", h)
				wantCode(t, err, runtime.CodeInvalidArgument)
				if !strings.Contains(err.Error(), "nil handler") {
					t.Errorf("error %q does not mention the nil handler", err)
				}
				err = n.Add("nh:1", h, runtime.Override())
				wantCode(t, err, runtime.CodeInvalidArgument)
			})
		}
		if len(n.Patterns()) != 0 {
			t.Errorf("Patterns() = %v after nil handlers", n.Patterns())
		}
	})

	t.Run("nil options are ignored", func(t *testing.T) {
		n := newTestNode(t)
		if err := n.Add("no:1", replyMsg("ok"), nil); err != nil {
			t.Fatalf("Add with a nil option: %v", err)
		}
		if res, err := n.Act(t.Context(), "no:1", nil, nil); err != nil || res.Value() != "ok" {
			t.Errorf("Act with a nil option = %v, %v", res.Value(), err)
		}
		if res, err := n.ActE(t.Context(), "no:1", nil, nil, runtime.Mixin("x"), nil); err != nil || res.Value() != "ok" {
			t.Errorf("ActE with nil options = %v, %v", res.Value(), err)
		}
		// A client is made once: a nil option there is an error (see
		// TestClient_BadConstruction); at a call it is ignored.
		c := newClient[point, string](t, n, "no:1")
		if res, err := c.Call(t.Context(), &point{}, nil); err != nil || *res != "ok" {
			t.Errorf("Client.Call with a nil option = %v, %v", res, err)
		}
	})

	t.Run("handler panic", func(t *testing.T) {
		var logs testlog.Buffer
		n := newTestNode(t, runtime.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
		mustAdd(t, n, "panic:1", func(ctx context.Context, r runtime.Request) (any, error) {
			if r.Get("ok") == true {
				return "fine", nil
			}
			panic("secret panic value")
		})
		for i := range 3 {
			_, err := n.Act(t.Context(), "panic:1", nil)
			wantCode(t, err, runtime.CodeInternal)
			if strings.Contains(err.Error(), "secret") || strings.Contains(err.Error(), "goroutine") {
				t.Errorf("call %d: error %q leaks the panic or a stack", i, err)
			}
			if !strings.Contains(err.Error(), "panic:1") {
				t.Errorf("call %d: error %q does not name the pattern", i, err)
			}
			res, err := n.Act(t.Context(), "panic:1", map[string]any{"ok": true})
			if err != nil || res.Value() != "fine" {
				t.Errorf("call %d after a panic = %v, %v", i, res.Value(), err)
			}
		}
		if !strings.Contains(logs.String(), "secret panic value") {
			t.Errorf("the panic was not logged:\n%s", logs.String())
		}
	})

	t.Run("nil ctx", func(t *testing.T) {
		n := newTestNode(t)
		mustAdd(t, n, "ctx:1", func(ctx context.Context, r runtime.Request) (any, error) {
			if ctx == nil {
				return nil, errors.New("handler got a nil ctx")
			}
			return "ok", ctx.Err()
		})
		var nilCtx context.Context
		if res, err := n.Act(nilCtx, "ctx:1", nil); err != nil || res.Value() != "ok" {
			t.Errorf("Act(nil ctx) = %v, %v", res.Value(), err)
		}
		if res, err := n.ActE(nilCtx, "ctx:1", nil, runtime.Timeout(time.Hour)); err != nil || res.Value() != "ok" {
			t.Errorf("ActE(nil ctx) = %v, %v", res.Value(), err)
		}
		if res, err := newClient[point, string](t, n, "ctx:1").Call(nilCtx, &point{}); err != nil || *res != "ok" {
			t.Errorf("Client.Call(nil ctx) = %v, %v", res, err)
		}
	})

	t.Run("done ctx", func(t *testing.T) {
		n := newTestNode(t)
		var ran atomic.Bool
		mustAdd(t, n, "ctx:1", func(context.Context, runtime.Request) (any, error) { ran.Store(true); return "ran", nil })
		cancelled, cancel := context.WithCancel(t.Context())
		cancel()
		expired, cancel2 := context.WithDeadline(t.Context(), time.Now().Add(-time.Second))
		defer cancel2()
		ctxs := []struct {
			name string
			ctx  context.Context
			code runtime.Code
			err  error
		}{
			{"cancelled", cancelled, runtime.CodeCanceled, context.Canceled},
			{"expired", expired, runtime.CodeDeadlineExceeded, context.DeadlineExceeded},
		}
		for _, c := range ctxs {
			calls := map[string]func() error{
				"Act":     func() error { _, err := n.Act(c.ctx, "ctx:1", nil); return err },
				"ActE":    func() error { _, err := n.ActE(c.ctx, "ctx:1", nil); return err },
				"NoReply": func() error { _, err := n.ActE(c.ctx, "ctx:1", nil, runtime.NoReply()); return err },
				"Client": func() error {
					_, err := newClient[point, string](t, n, "ctx:1").Call(c.ctx, &point{})
					return err
				},
			}
			for name, call := range calls {
				t.Run(c.name+"/"+name, func(t *testing.T) {
					err := call()
					wantCode(t, err, c.code)
					if !errors.Is(err, c.err) {
						t.Errorf("errors.Is(%v, %v) = false", err, c.err)
					}
				})
			}
		}
		if ran.Load() {
			t.Error("a handler ran with a done ctx")
		}
	})

	t.Run("typed nil error from a handler", func(t *testing.T) {
		n := newTestNode(t)
		mustAdd(t, n, "tn:1", func(context.Context, runtime.Request) (any, error) {
			var e *runtime.Error // the classic mistake: a nil *Error as an error
			return "ok", e
		})
		res, err := n.Act(t.Context(), "tn:1", nil)
		if err != nil {
			t.Fatalf("Act = %v (%T), want no error for a nil *Error", err, err)
		}
		if res.Value() != "ok" {
			t.Errorf("Value() = %v, want ok", res.Value())
		}
	})
}
