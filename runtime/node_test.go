package runtime_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/leak"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testlog"
)

// guard bounds every wait in these tests. It only turns a hang into a
// failure: no test relies on it for synchronisation.
const guard = 30 * time.Second

// newTestNode returns a node that is closed when the test ends.
func newTestNode(t *testing.T, opts ...runtime.Option) *runtime.Node {
	t.Helper()
	n, err := runtime.New(opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return n
}

func mustAdd(t *testing.T, n *runtime.Node, pattern string, h runtime.Handler, opts ...runtime.HandlerOption) {
	t.Helper()
	if err := n.Add(pattern, h, opts...); err != nil {
		t.Fatalf("Add(%q): %v", pattern, err)
	}
}

// wantCode fails unless err is a *runtime.Error with the given code.
func wantCode(t *testing.T, err error, code runtime.Code) {
	t.Helper()
	if err == nil {
		t.Fatalf("err = nil, want %v", code)
	}
	var e *runtime.Error
	if !errors.As(err, &e) {
		t.Fatalf("err = %v (%T), want a *runtime.Error", err, err)
	}
	if got := runtime.CodeOf(err); got != code {
		t.Fatalf("CodeOf(%q) = %v, want %v", err, got, code)
	}
}

// wait receives from ch, failing the test after the guard.
func wait[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	timer := time.NewTimer(guard)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

func TestNew_Options(t *testing.T) {
	okIC := func(next runtime.Handler) runtime.Handler { return next }
	tests := []struct {
		name    string
		opts    []runtime.Option
		wantErr string // substring; "" means success
	}{
		{"no options", nil, ""},
		{"all options", []runtime.Option{
			runtime.WithID("n1"),
			runtime.WithLogger(slog.New(slog.DiscardHandler)),
			runtime.WithMaxInFlight(10),
			runtime.WithHandlerInterceptors(okIC),
			runtime.WithCallInterceptors(func(next runtime.Invoker) runtime.Invoker { return next }),
		}, ""},
		{"zero max in flight means no limit", []runtime.Option{runtime.WithMaxInFlight(0)}, ""},
		{"nil logger means the default", []runtime.Option{runtime.WithLogger(nil)}, ""},
		{"nil option", []runtime.Option{runtime.WithID("x"), nil}, "nil option"},
		{"negative max in flight", []runtime.Option{runtime.WithMaxInFlight(-1)}, "negative"},
		{"nil handler interceptor", []runtime.Option{runtime.WithHandlerInterceptors(okIC, nil)}, "nil handler interceptor"},
		{"nil call interceptor", []runtime.Option{runtime.WithCallInterceptors(nil)}, "nil call interceptor"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, err := runtime.New(tt.opts...)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				if err := n.Close(); err != nil {
					t.Fatalf("Close: %v", err)
				}
				return
			}
			if err == nil {
				n.Close()
				t.Fatalf("New succeeded, want an error containing %q", tt.wantErr)
			}
			if n != nil {
				t.Errorf("New returned a node with the error %v", err)
			}
			if !strings.Contains(err.Error(), tt.wantErr) || !strings.HasPrefix(err.Error(), "wizard: ") {
				t.Errorf("New error = %q, want it to start with \"wizard: \" and contain %q", err, tt.wantErr)
			}
		})
	}
}

func TestNode_ID(t *testing.T) {
	if got := newTestNode(t, runtime.WithID("alpha")).ID(); got != "alpha" {
		t.Errorf("ID() = %q, want alpha", got)
	}
	a, b := newTestNode(t).ID(), newTestNode(t).ID()
	if a == "" || a == b {
		t.Errorf("default IDs %q and %q: want unique and non-empty", a, b)
	}
}

// TestAct_MessageKinds sends every supported message kind through Act and
// ActE and checks what routes and what the handler receives.
func TestAct_MessageKinds(t *testing.T) {
	sum := newSum(map[string]any{"cmd": "echo", "a": 1.5})
	tests := []struct {
		name    string
		msg     any
		wantAct any // Request.Msg() under Act("role:rt", msg)
	}{
		{
			name:    "map[string]any",
			msg:     map[string]any{"cmd": "echo", "a": 1, "nested": map[string]any{"x": 1}},
			wantAct: map[string]any{"role": "rt", "cmd": "echo", "a": 1, "nested": map[string]any{"x": 1}},
		},
		{
			name:    "map[string]string",
			msg:     map[string]string{"cmd": "echo", "a": "x"},
			wantAct: map[string]any{"role": "rt", "cmd": "echo", "a": "x"},
		},
		{
			name:    "JSON bytes",
			msg:     []byte(`{"cmd": "echo", "a": 1, "list": [1, 2]}`),
			wantAct: map[string]any{"role": "rt", "cmd": "echo", "a": 1.0, "list": []any{1.0, 2.0}},
		},
		{
			name:    "json.RawMessage",
			msg:     json.RawMessage(`{"cmd": "echo", "a": "r"}`),
			wantAct: map[string]any{"role": "rt", "cmd": "echo", "a": "r"},
		},
		{
			name:    "protobuf message reaches the handler as is",
			msg:     sum,
			wantAct: sum,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := newTestNode(t)
			var act, acte any
			mustAdd(t, n, "role:rt", func(ctx context.Context, r runtime.Request) (any, error) {
				return nil, fmt.Errorf("the wider pattern answered %v", r.Msg())
			})
			mustAdd(t, n, "role:rt,cmd:echo", func(ctx context.Context, r runtime.Request) (any, error) {
				act = r.Msg()
				return "act", nil
			})
			mustAdd(t, n, "role:rte", func(ctx context.Context, r runtime.Request) (any, error) {
				acte = r.Msg()
				return "acte", nil
			})

			// Act: the message's fields route (cmd:echo picks the narrower pattern).
			res, err := n.Act(t.Context(), "role:rt", tt.msg)
			if err != nil {
				t.Fatalf("Act: %v", err)
			}
			if res.Value() != "act" {
				t.Errorf("Act Value() = %v, want act", res.Value())
			}
			if diff := cmp.Diff(tt.wantAct, act, protocmp.Transform()); diff != "" {
				t.Errorf("Act: handler's Msg() mismatch (-want +got):\n%s", diff)
			}

			// ActE: only the pattern routes; the handler gets the data as is.
			res, err = n.ActE(t.Context(), "role:rte", tt.msg)
			if err != nil {
				t.Fatalf("ActE: %v", err)
			}
			if res.Value() != "acte" {
				t.Errorf("ActE Value() = %v, want acte", res.Value())
			}
			if diff := cmp.Diff(tt.msg, acte, protocmp.Transform()); diff != "" {
				t.Errorf("ActE: handler's Msg() mismatch (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("nil", func(t *testing.T) {
		n := newTestNode(t)
		var act any = "unset"
		var acte any = "unset"
		mustAdd(t, n, "role:rt,cmd:echo", func(ctx context.Context, r runtime.Request) (any, error) {
			act = r.Msg()
			return nil, nil
		})
		if _, err := n.Act(t.Context(), "role:rt,cmd:echo", nil); err != nil {
			t.Fatalf("Act: %v", err)
		}
		if diff := cmp.Diff(map[string]any{"role": "rt", "cmd": "echo"}, act); diff != "" {
			t.Errorf("Act(nil): Msg() mismatch (-want +got):\n%s", diff)
		}
		mustAdd(t, n, "role:rte", func(ctx context.Context, r runtime.Request) (any, error) {
			acte = r.Msg()
			return nil, nil
		})
		if _, err := n.ActE(t.Context(), "role:rte", nil); err != nil {
			t.Fatalf("ActE: %v", err)
		}
		if acte != nil {
			t.Errorf("ActE(nil): Msg() = %v, want nil", acte)
		}
	})

	t.Run("generated protobuf type", func(t *testing.T) {
		n := newTestNode(t)
		msg := wrapperspb.String("hi")
		mustAdd(t, n, "role:rt,value:hi", func(ctx context.Context, r runtime.Request) (any, error) {
			if r.Msg() != proto.Message(msg) {
				return nil, fmt.Errorf("Msg() = %v, want the caller's message", r.Msg())
			}
			return wrapperspb.String(r.Get("value").(string) + "!"), nil
		})
		res, err := n.Act(t.Context(), "role:rt", msg)
		if err != nil {
			t.Fatalf("Act: %v", err)
		}
		if diff := cmp.Diff(wrapperspb.String("hi!"), res.Value(), protocmp.Transform()); diff != "" {
			t.Errorf("Value() mismatch (-want +got):\n%s", diff)
		}
	})
}

// TestAct_Overlay checks Act's message: the message's root fields overlaid
// with the pattern's pairs.
func TestAct_Overlay(t *testing.T) {
	n := newTestNode(t)
	type seen struct {
		Pattern string
		Msg     any
		Get     map[string]any
	}
	var got seen
	record := func(ctx context.Context, r runtime.Request) (any, error) {
		got = seen{
			Pattern: r.Pattern().String(),
			Msg:     maps.Clone(r.Msg().(map[string]any)),
			Get:     map[string]any{"role": r.Get("role"), "cmd": r.Get("cmd"), "v": r.Get("v"), "meta$": r.Get("meta$")},
		}
		// The handler may change what it received; the caller must not see it.
		if m, ok := r.Msg().(map[string]any); ok {
			m["added"] = true
			m["cmd"] = "changed"
		}
		return nil, nil
	}
	mustAdd(t, n, "role:o", record)
	mustAdd(t, n, "role:o,cmd:get", record)
	mustAdd(t, n, "role:o,cmd:get,v:2", record)
	mustAdd(t, n, "role:other,cmd:get", func(context.Context, runtime.Request) (any, error) {
		return nil, errors.New("the message's role must not win over the pattern's")
	})

	tests := []struct {
		name    string
		pattern string
		msg     map[string]any
		want    seen
	}{
		{
			name:    "all root keys route",
			pattern: "role:o",
			msg:     map[string]any{"cmd": "get", "v": 2},
			want: seen{
				Pattern: "cmd:get,role:o,v:2",
				Msg:     map[string]any{"role": "o", "cmd": "get", "v": 2},
				Get:     map[string]any{"role": "o", "cmd": "get", "v": 2, "meta$": nil},
			},
		},
		{
			name:    "the pattern wins on a shared key",
			pattern: "role:o,cmd:get",
			msg:     map[string]any{"role": "other", "cmd": "put"},
			want: seen{
				Pattern: "cmd:get,role:o",
				Msg:     map[string]any{"role": "o", "cmd": "get"},
				Get:     map[string]any{"role": "o", "cmd": "get", "v": nil, "meta$": nil},
			},
		},
		{
			name:    "metadata, nested and nil values do not route but reach the handler",
			pattern: "role:o",
			msg:     map[string]any{"cmd": "get", "meta$": "m", "v": nil, "x": []int{2}},
			want: seen{
				Pattern: "cmd:get,role:o",
				Msg:     map[string]any{"role": "o", "cmd": "get", "meta$": "m", "v": nil, "x": []int{2}},
				Get:     map[string]any{"role": "o", "cmd": "get", "v": nil, "meta$": "m"},
			},
		},
		{
			name:    "the empty pattern routes by the message alone",
			pattern: "",
			msg:     map[string]any{"role": "o", "cmd": "get"},
			want: seen{
				Pattern: "cmd:get,role:o",
				Msg:     map[string]any{"role": "o", "cmd": "get"},
				Get:     map[string]any{"role": "o", "cmd": "get", "v": nil, "meta$": nil},
			},
		},
		{
			name:    "a nil map",
			pattern: "role:o",
			msg:     nil,
			want: seen{
				Pattern: "role:o",
				Msg:     map[string]any{"role": "o"},
				Get:     map[string]any{"role": "o", "cmd": nil, "v": nil, "meta$": nil},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var before map[string]any
			if tt.msg != nil {
				before = make(map[string]any, len(tt.msg))
				for k, v := range tt.msg {
					before[k] = v
				}
			}
			if _, err := n.Act(t.Context(), tt.pattern, tt.msg); err != nil {
				t.Fatalf("Act: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("handler saw (-want +got):\n%s", diff)
			}
			if tt.msg != nil {
				if diff := cmp.Diff(before, tt.msg); diff != "" {
					t.Errorf("Act modified the caller's map (-before +after):\n%s", diff)
				}
			}
		})
	}
}

// TestActE_Mixin checks that ActE routes by the pattern alone, plus the
// Mixin fields of the data, and hands the handler the data alone.
func TestActE_Mixin(t *testing.T) {
	n := newTestNode(t)
	var got any
	handler := func(name string) runtime.Handler {
		return func(ctx context.Context, r runtime.Request) (any, error) {
			got = r.Msg()
			return name, nil
		}
	}
	mustAdd(t, n, "role:e,cmd:get", handler("base"))
	mustAdd(t, n, "role:e,cmd:get,n:7", handler("n7"))
	mustAdd(t, n, "role:e,cmd:put,n:7", handler("put"))

	datas := []struct {
		name string
		data any
	}{
		{"map[string]any", map[string]any{"n": 7, "cmd": "put"}},
		{"map[string]string", map[string]string{"n": "7", "cmd": "put"}},
		{"JSON bytes", []byte(`{"n": 7, "cmd": "put"}`)},
		{"json.RawMessage", json.RawMessage(`{"n": 7.0, "cmd": "put"}`)},
		{"protobuf", newSum(map[string]any{"n": int32(7), "cmd": "put"})},
	}
	tests := []struct {
		name string
		opts []runtime.CallOption
		want string
	}{
		{"data does not route", nil, "base"},
		{"a mixin field routes", []runtime.CallOption{runtime.Mixin("n")}, "n7"},
		{"the pattern wins over a mixin", []runtime.CallOption{runtime.Mixin("cmd", "n")}, "n7"},
		{"a missing mixin field is ignored", []runtime.CallOption{runtime.Mixin("absent")}, "base"},
		{"a metadata mixin is ignored", []runtime.CallOption{runtime.Mixin("n$")}, "base"},
		{"mixins accumulate", []runtime.CallOption{runtime.Mixin("absent"), runtime.Mixin("n")}, "n7"},
	}
	for _, d := range datas {
		for _, tt := range tests {
			t.Run(d.name+"/"+tt.name, func(t *testing.T) {
				got = nil
				res, err := n.ActE(t.Context(), "role:e,cmd:get", d.data, tt.opts...)
				if err != nil {
					t.Fatalf("ActE: %v", err)
				}
				if res.Value() != tt.want {
					t.Errorf("answered by %v, want %v", res.Value(), tt.want)
				}
				if diff := cmp.Diff(d.data, got, protocmp.Transform()); diff != "" {
					t.Errorf("handler's Msg() is not the data (-want +got):\n%s", diff)
				}
			})
		}
	}

	t.Run("not found names the pattern with its mixins", func(t *testing.T) {
		_, err := n.ActE(t.Context(), "role:e", map[string]any{"cmd": "delete"}, runtime.Mixin("cmd"))
		wantCode(t, err, runtime.CodeNotFound)
		if !strings.Contains(err.Error(), `"cmd:delete,role:e"`) {
			t.Errorf("error %q does not name the pattern cmd:delete,role:e", err)
		}
	})
}

func TestAdd_OverridePriorRemove(t *testing.T) {
	t.Run("override makes the old handler the prior", func(t *testing.T) {
		n := newTestNode(t)
		mustAdd(t, n, "p:1", func(ctx context.Context, r runtime.Request) (any, error) {
			return fmt.Sprintf("one(%v)", r.Get("x")), nil
		})
		mustAdd(t, n, "p:1", func(ctx context.Context, r runtime.Request) (any, error) {
			prior, err := r.Prior(ctx, map[string]any{"x": "from two"})
			return fmt.Sprintf("two>%v", prior), err
		}, runtime.Override())
		mustAdd(t, n, "p : 1", func(ctx context.Context, r runtime.Request) (any, error) {
			prior, err := r.Prior(ctx, r.Msg())
			return fmt.Sprintf("three>%v", prior), err
		}, runtime.Override())
		res, err := n.Act(t.Context(), "p:1", nil)
		if err != nil {
			t.Fatalf("Act: %v", err)
		}
		if diff := cmp.Diff("three>two>one(from two)", res.Value()); diff != "" {
			t.Errorf("Value() mismatch (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"p:1"}, patternStringsOf(n.Patterns())); diff != "" {
			t.Errorf("Patterns() mismatch (-want +got):\n%s", diff)
		}
	})

	t.Run("prior without a prior is not found", func(t *testing.T) {
		n := newTestNode(t)
		h := func(ctx context.Context, r runtime.Request) (any, error) { return r.Prior(ctx, r.Msg()) }
		mustAdd(t, n, "p:1", h)
		mustAdd(t, n, "p:2", h, runtime.Override()) // Override of nothing: still no prior
		for _, p := range []string{"p:1", "p:2"} {
			_, err := n.Act(t.Context(), p, nil)
			wantCode(t, err, runtime.CodeNotFound)
			if !errors.Is(err, runtime.ErrNotFound) || !strings.Contains(err.Error(), p) {
				t.Errorf("Act(%q) error = %v, want ErrNotFound naming the pattern", p, err)
			}
		}
	})

	t.Run("a prior's error and panic reach the caller", func(t *testing.T) {
		n := newTestNode(t)
		mustAdd(t, n, "p:1", func(ctx context.Context, r runtime.Request) (any, error) {
			if r.Get("panic") == true {
				panic("prior panicked")
			}
			return nil, runtime.NewError(runtime.CodePermissionDenied, "wizard: prior says no")
		})
		mustAdd(t, n, "p:1", func(ctx context.Context, r runtime.Request) (any, error) {
			return r.Prior(ctx, r.Msg())
		}, runtime.Override())
		_, err := n.Act(t.Context(), "p:1", nil)
		wantCode(t, err, runtime.CodePermissionDenied)
		_, err = n.Act(t.Context(), "p:1", map[string]any{"panic": true})
		wantCode(t, err, runtime.CodeInternal)
	})

	t.Run("duplicate without override", func(t *testing.T) {
		n := newTestNode(t)
		mustAdd(t, n, "b:2,a:1", replyMsg("first"))
		err := n.Add("a:1, b:2", replyMsg("second"))
		wantCode(t, err, runtime.CodeAlreadyExists)
		if !strings.Contains(err.Error(), "a:1,b:2") {
			t.Errorf("error %q does not name the pattern", err)
		}
		res, err := n.Act(t.Context(), "a:1,b:2", nil)
		if err != nil || res.Value() != "first" {
			t.Errorf("after a failed Add: Act = %v, %v; want the first handler", res.Value(), err)
		}
	})

	t.Run("remove", func(t *testing.T) {
		n := newTestNode(t)
		mustAdd(t, n, "r:1", replyMsg("one"))
		mustAdd(t, n, "r:1", replyMsg("override"), runtime.Override())
		mustAdd(t, n, "r:1,s:2", replyMsg("narrow"))
		// Resolve once, so a cached resolution must be dropped by Remove.
		if res, err := n.ActE(t.Context(), "r:1", nil); err != nil || res.Value() != "override" {
			t.Fatalf("ActE before Remove = %v, %v", res.Value(), err)
		}
		ok, err := n.Remove("r : 1")
		if !ok || err != nil {
			t.Fatalf("Remove = %v, %v; want true, nil", ok, err)
		}
		_, err = n.ActE(t.Context(), "r:1", nil)
		wantCode(t, err, runtime.CodeNotFound)
		if res, err := n.ActE(t.Context(), "r:1,s:2", nil); err != nil || res.Value() != "narrow" {
			t.Errorf("the narrower pattern after Remove = %v, %v", res.Value(), err)
		}
		if ok, err := n.Remove("r:1"); ok || err != nil {
			t.Errorf("second Remove = %v, %v; want false, nil", ok, err)
		}
		// Remove dropped the priors too: a plain Add works and has no prior.
		mustAdd(t, n, "r:1", func(ctx context.Context, r runtime.Request) (any, error) { return r.Prior(ctx, nil) })
		_, err = n.ActE(t.Context(), "r:1", nil)
		wantCode(t, err, runtime.CodeNotFound)
		var perr *runtime.ParseError
		if _, err := n.Remove("r:"); !errors.As(err, &perr) {
			t.Errorf("Remove of a bad pattern: err = %v, want a *ParseError", err)
		}
	})
}

func patternStringsOf(ps []runtime.PatternInfo) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Pattern.String()
	}
	return out
}

func TestNoReply(t *testing.T) {
	calls := []struct {
		name string
		call func(ctx context.Context, n *runtime.Node) (any, error)
	}{
		{"Act", func(ctx context.Context, n *runtime.Node) (any, error) {
			res, err := n.Act(ctx, "nr:1", map[string]any{"k": "v"}, runtime.NoReply())
			return res.Value(), err
		}},
		{"ActE", func(ctx context.Context, n *runtime.Node) (any, error) {
			res, err := n.ActE(ctx, "nr:1", map[string]any{"k": "v"}, runtime.NoReply())
			return res.Value(), err
		}},
		{"Client option", func(ctx context.Context, n *runtime.Node) (any, error) {
			res, err := runtime.NewClient[map[string]any, string](n, "nr:1", runtime.NoReply()).Call(ctx, &map[string]any{"k": "v"})
			return res, err
		}},
		{"Client call option", func(ctx context.Context, n *runtime.Node) (any, error) {
			res, err := runtime.NewClient[map[string]any, string](n, "nr:1").Call(ctx, &map[string]any{"k": "v"}, runtime.NoReply())
			return res, err
		}},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			n := newTestNode(t)
			ran := make(chan any, 1)
			release := make(chan struct{})
			var handlerCtxErr atomic.Value
			mustAdd(t, n, "nr:1", func(ctx context.Context, r runtime.Request) (any, error) {
				<-release
				if err := ctx.Err(); err != nil {
					handlerCtxErr.Store(err)
				}
				var m map[string]any
				if err := r.Decode(&m); err != nil {
					return nil, err
				}
				ran <- m["k"]
				return "dropped", errors.New("dropped too")
			})
			ctx, cancel := context.WithCancel(t.Context())
			type out struct {
				v   any
				err error
			}
			returned := make(chan out, 1)
			go func() {
				v, err := c.call(ctx, n)
				returned <- out{v, err}
			}()
			// The call returns while the handler is still blocked.
			o := wait(t, returned, "the NoReply call to return")
			if o.err != nil {
				t.Fatalf("NoReply call: %v", o.err)
			}
			if !isNilValue(o.v) {
				t.Errorf("NoReply result = %v, want empty", o.v)
			}
			// The caller's cancellation does not reach the detached handler.
			cancel()
			close(release)
			if got := wait(t, ran, "the handler to run"); got != "v" {
				t.Errorf("handler saw k = %v, want v", got)
			}
			if err := handlerCtxErr.Load(); err != nil {
				t.Errorf("handler ctx was done: %v", err)
			}
		})
	}

	t.Run("no match is still an error", func(t *testing.T) {
		n := newTestNode(t)
		_, err := n.Act(t.Context(), "nr:none", nil, runtime.NoReply())
		wantCode(t, err, runtime.CodeNotFound)
	})

	t.Run("a failing handler is logged", func(t *testing.T) {
		var logs testlog.Buffer
		n, err := runtime.New(runtime.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
		if err != nil {
			t.Fatal(err)
		}
		mustAdd(t, n, "nr:err", func(context.Context, runtime.Request) (any, error) { return nil, errors.New("boom") })
		mustAdd(t, n, "nr:panic", func(context.Context, runtime.Request) (any, error) { panic("kaboom") })
		for _, p := range []string{"nr:err", "nr:panic"} {
			if _, err := n.Act(t.Context(), p, nil, runtime.NoReply()); err != nil {
				t.Fatalf("Act(%q): %v", p, err)
			}
		}
		// Close waits for the no-reply handlers, so their logs are written.
		if err := n.Close(); err != nil {
			t.Fatal(err)
		}
		out := logs.String()
		for _, want := range []string{"boom", "kaboom", "nr:err", "nr:panic"} {
			if !strings.Contains(out, want) {
				t.Errorf("log does not mention %q:\n%s", want, out)
			}
		}
	})
}

func isNilValue(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case *string:
		return v == nil
	}
	return false
}

func TestDefaultAndNotFound(t *testing.T) {
	n := newTestNode(t)
	mustAdd(t, n, "d:1", replyMsg("handler"))

	res, err := n.Act(t.Context(), "d:2", nil, runtime.Default("fallback"))
	if err != nil || res.Value() != "fallback" {
		t.Errorf("Act with Default, no match = %v, %v; want fallback", res.Value(), err)
	}
	res, err = n.ActE(t.Context(), "d:2", nil, runtime.Default(42))
	if err != nil || res.Value() != 42 {
		t.Errorf("ActE with Default, no match = %v, %v; want 42", res.Value(), err)
	}
	res, err = n.Act(t.Context(), "d:1", nil, runtime.Default("fallback"))
	if err != nil || res.Value() != "handler" {
		t.Errorf("Act with Default and a match = %v, %v; want the handler's", res.Value(), err)
	}
	res, err = n.Act(t.Context(), "d:2", nil, runtime.Default(nil))
	if err != nil || res.Value() != nil {
		t.Errorf("Act with Default(nil) = %v, %v; want nil, nil", res.Value(), err)
	}

	tests := []struct {
		name string
		call func() error
		want string // the pattern the error must name
	}{
		{"Act names the message's pattern", func() error {
			_, err := n.Act(t.Context(), "role:x", map[string]any{"cmd": "y", "n": 1.0, "deep": map[string]any{"z": 1}})
			return err
		}, `"cmd:y,n:1,role:x"`},
		{"Act JSON", func() error {
			_, err := n.Act(t.Context(), "d:3", []byte(`{"q": "a,b"}`))
			return err
		}, `"d:3,q:\"a,b\""`},
		{"ActE names the pattern", func() error {
			_, err := n.ActE(t.Context(), "b:1,a:2", map[string]any{"cmd": "y"})
			return err
		}, `"a:2,b:1"`},
		{"Client", func() error {
			_, err := runtime.NewClient[point, point](n, "c:1").Call(t.Context(), &point{})
			return err
		}, `"c:1"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			wantCode(t, err, runtime.CodeNotFound)
			if !errors.Is(err, runtime.ErrNotFound) {
				t.Errorf("errors.Is(%v, ErrNotFound) = false", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not name %s", err, tt.want)
			}
		})
	}
}

func TestHandlerInterceptors(t *testing.T) {
	var trace []string
	ic := func(name string) runtime.HandlerInterceptor {
		return func(next runtime.Handler) runtime.Handler {
			return func(ctx context.Context, r runtime.Request) (any, error) {
				trace = append(trace, name+">")
				v, err := next(ctx, r)
				trace = append(trace, "<"+name)
				return v, err
			}
		}
	}
	n := newTestNode(t, runtime.WithHandlerInterceptors(ic("a"), ic("b")), runtime.WithHandlerInterceptors(ic("c")))
	mustAdd(t, n, "hi:1", func(ctx context.Context, r runtime.Request) (any, error) {
		trace = append(trace, "handler")
		return r.Get("x"), nil
	})
	mustAdd(t, n, "hi:1", func(ctx context.Context, r runtime.Request) (any, error) {
		trace = append(trace, "override")
		return r.Prior(ctx, r.Msg())
	}, runtime.Override())

	res, err := n.Act(t.Context(), "hi:1", map[string]any{"x": "y"})
	if err != nil || res.Value() != "y" {
		t.Fatalf("Act = %v, %v", res.Value(), err)
	}
	// The first interceptor is the outermost; the prior is wrapped too.
	want := []string{"a>", "b>", "c>", "override", "a>", "b>", "c>", "handler", "<c", "<b", "<a", "<c", "<b", "<a"}
	if diff := cmp.Diff(want, trace); diff != "" {
		t.Errorf("trace mismatch (-want +got):\n%s", diff)
	}

	t.Run("an interceptor can refuse", func(t *testing.T) {
		deny := func(next runtime.Handler) runtime.Handler {
			return func(ctx context.Context, r runtime.Request) (any, error) {
				if r.Get("token") != "ok" {
					return nil, runtime.NewError(runtime.CodeUnauthenticated, "wizard: no token")
				}
				return next(ctx, r)
			}
		}
		n := newTestNode(t, runtime.WithHandlerInterceptors(deny))
		mustAdd(t, n, "auth:1", replyMsg("in"))
		_, err := n.Act(t.Context(), "auth:1", nil)
		wantCode(t, err, runtime.CodeUnauthenticated)
		res, err := n.Act(t.Context(), "auth:1", map[string]any{"token": "ok"})
		if err != nil || res.Value() != "in" {
			t.Errorf("Act with token = %v, %v", res.Value(), err)
		}
	})
}

func TestCallInterceptors(t *testing.T) {
	type seenCall struct {
		Pattern string
		Msg     any
		NoReply bool
	}
	var (
		mu    sync.Mutex
		calls []seenCall
		trace []string
	)
	record := func(next runtime.Invoker) runtime.Invoker {
		return func(ctx context.Context, c *runtime.Call) (runtime.Result, error) {
			mu.Lock()
			calls = append(calls, seenCall{c.Pattern.String(), c.Msg, c.NoReply})
			trace = append(trace, "record")
			mu.Unlock()
			return next(ctx, c)
		}
	}
	block := func(next runtime.Invoker) runtime.Invoker {
		return func(ctx context.Context, c *runtime.Call) (runtime.Result, error) {
			mu.Lock()
			trace = append(trace, "block")
			mu.Unlock()
			if ctx == nil {
				return runtime.Result{}, errors.New("interceptor got a nil ctx")
			}
			if v, _ := c.Pattern.Get("cmd"); v == "blocked" {
				return runtime.Result{}, runtime.NewError(runtime.CodePermissionDenied, "wizard: blocked")
			}
			return next(ctx, c)
		}
	}
	n := newTestNode(t, runtime.WithCallInterceptors(record, block))
	var ran atomic.Int32
	done := make(chan struct{}, 1)
	mustAdd(t, n, "ci:1", func(ctx context.Context, r runtime.Request) (any, error) {
		ran.Add(1)
		select {
		case done <- struct{}{}:
		default:
		}
		return r.Msg(), nil
	})
	mustAdd(t, n, "ci:1,cmd:get", func(ctx context.Context, r runtime.Request) (any, error) {
		ran.Add(1)
		return "get:" + fmt.Sprint(r.Get("id")), nil
	})
	mustAdd(t, n, "ci:1,cmd:blocked", func(ctx context.Context, r runtime.Request) (any, error) {
		ran.Add(1)
		return "should not run", nil
	})

	reset := func() {
		mu.Lock()
		calls, trace = nil, nil
		mu.Unlock()
		ran.Store(0)
		select {
		case <-done:
		default:
		}
	}

	t.Run("Act: the pattern is every routed key, Msg the merged map", func(t *testing.T) {
		reset()
		res, err := n.Act(t.Context(), "ci:1", map[string]any{"cmd": "get", "id": 3})
		if err != nil || res.Value() != "get:3" {
			t.Fatalf("Act = %v, %v", res.Value(), err)
		}
		want := []seenCall{{Pattern: "ci:1,cmd:get,id:3", Msg: map[string]any{"ci": "1", "cmd": "get", "id": 3}}}
		if diff := cmp.Diff(want, calls); diff != "" {
			t.Errorf("calls mismatch (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"record", "block"}, trace); diff != "" {
			t.Errorf("the first interceptor must be the outermost (-want +got):\n%s", diff)
		}
	})

	t.Run("ActE: the pattern and mixins, Msg the data", func(t *testing.T) {
		reset()
		data := map[string]any{"cmd": "get", "id": 4}
		res, err := n.ActE(t.Context(), "ci:1", data, runtime.Mixin("cmd"))
		if err != nil || res.Value() != "get:4" {
			t.Fatalf("ActE = %v, %v", res.Value(), err)
		}
		want := []seenCall{{Pattern: "ci:1,cmd:get", Msg: data}}
		if diff := cmp.Diff(want, calls); diff != "" {
			t.Errorf("calls mismatch (-want +got):\n%s", diff)
		}
	})

	t.Run("Client", func(t *testing.T) {
		reset()
		req := &point{X: 1}
		res, err := runtime.NewClient[point, point](n, "ci:1").Call(t.Context(), req)
		if err != nil || res != req {
			t.Fatalf("Call = %v, %v; want the request back", res, err)
		}
		want := []seenCall{{Pattern: "ci:1", Msg: req}}
		if diff := cmp.Diff(want, calls); diff != "" {
			t.Errorf("calls mismatch (-want +got):\n%s", diff)
		}
	})

	t.Run("Act proto: Msg is the message, Get sees the pattern", func(t *testing.T) {
		reset()
		msg := newSum(map[string]any{"cmd": "get", "n": int32(5)})
		mustAdd(t, n, "ci:1,cmd:get,n:5", func(ctx context.Context, r runtime.Request) (any, error) {
			if r.Msg() != any(msg) {
				return nil, fmt.Errorf("Msg() = %v, want the caller's message", r.Msg())
			}
			return fmt.Sprint(r.Get("ci"), r.Get("cmd"), r.Get("n")), nil
		})
		res, err := n.Act(t.Context(), "ci:1", msg)
		if err != nil || res.Value() != "1get5" {
			t.Fatalf("Act = %v, %v; want 1get5", res.Value(), err)
		}
		if len(calls) != 1 || calls[0].Pattern != "ci:1,cmd:get,n:5" || calls[0].Msg != any(msg) {
			t.Errorf("calls = %+v", calls)
		}
	})

	t.Run("short-circuit", func(t *testing.T) {
		reset()
		_, err := n.Act(t.Context(), "ci:1,cmd:blocked", nil)
		wantCode(t, err, runtime.CodePermissionDenied)
		_, err = n.ActE(t.Context(), "ci:1,cmd:blocked", nil)
		wantCode(t, err, runtime.CodePermissionDenied)
		if ran.Load() != 0 {
			t.Errorf("the handler ran %d times behind a short-circuiting interceptor", ran.Load())
		}
	})

	t.Run("Default still works", func(t *testing.T) {
		reset()
		res, err := n.Act(t.Context(), "ci:2", nil, runtime.Default("dflt"))
		if err != nil || res.Value() != "dflt" {
			t.Errorf("Act = %v, %v; want dflt", res.Value(), err)
		}
		res, err = n.ActE(t.Context(), "ci:2", nil, runtime.Default("dflt"), runtime.Mixin("x"))
		if err != nil || res.Value() != "dflt" {
			t.Errorf("ActE = %v, %v; want dflt", res.Value(), err)
		}
		_, err = n.ActE(t.Context(), "ci:2", nil)
		wantCode(t, err, runtime.CodeNotFound)
		if len(calls) != 3 {
			t.Errorf("interceptors saw %d calls, want 3", len(calls))
		}
	})

	t.Run("NoReply", func(t *testing.T) {
		reset()
		if _, err := n.ActE(t.Context(), "ci:1", nil, runtime.NoReply()); err != nil {
			t.Fatal(err)
		}
		wait(t, done, "the no-reply handler")
		if len(calls) != 1 || !calls[0].NoReply {
			t.Errorf("calls = %+v, want one with NoReply", calls)
		}
	})

	t.Run("nil ctx", func(t *testing.T) {
		reset()
		var nilCtx context.Context
		if _, err := n.Act(nilCtx, "ci:1", nil); err != nil {
			t.Errorf("Act(nil ctx): %v", err)
		}
		if _, err := n.ActE(nilCtx, "ci:1", nil); err != nil {
			t.Errorf("ActE(nil ctx): %v", err)
		}
	})
}

func TestMaxInFlight(t *testing.T) {
	const limit = 3
	n := newTestNode(t, runtime.WithMaxInFlight(limit))
	started := make(chan struct{}, 100)
	release := make(chan struct{})
	var runs atomic.Int32
	mustAdd(t, n, "mif:1", func(ctx context.Context, r runtime.Request) (any, error) {
		runs.Add(1)
		started <- struct{}{}
		<-release
		return "ok", nil
	})

	var wg sync.WaitGroup
	errs := make(chan error, limit)
	for range limit {
		wg.Go(func() {
			_, err := n.Act(context.Background(), "mif:1", nil)
			errs <- err
		})
	}
	for range limit {
		wait(t, started, "a handler to start")
	}

	refused := []struct {
		name string
		call func() error
	}{
		{"Act", func() error { _, err := n.Act(t.Context(), "mif:1", nil); return err }},
		{"ActE", func() error { _, err := n.ActE(t.Context(), "mif:1", nil); return err }},
		{"NoReply", func() error { _, err := n.ActE(t.Context(), "mif:1", nil, runtime.NoReply()); return err }},
		{"Client", func() error {
			_, err := runtime.NewClient[point, point](n, "mif:1").Call(t.Context(), &point{})
			return err
		}},
	}
	for _, r := range refused {
		t.Run(r.name+" refused", func(t *testing.T) {
			err := r.call()
			wantCode(t, err, runtime.CodeResourceExhausted)
			if !errors.Is(err, runtime.ErrResourceExhausted) || !errors.Is(err, runtime.ErrOverloaded) {
				t.Errorf("errors.Is(%v, ErrResourceExhausted/ErrOverloaded) = false", err)
			}
		})
	}
	if got := runs.Load(); got != limit {
		t.Errorf("handler ran %d times, want %d: a refused call ran it", got, limit)
	}

	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("a call within the limit failed: %v", err)
		}
	}
	for i := range limit + 2 {
		if res, err := n.Act(t.Context(), "mif:1", nil); err != nil || res.Value() != "ok" {
			t.Errorf("call %d after release = %v, %v", i, res.Value(), err)
		}
	}
}

func TestClose(t *testing.T) {
	checkLeaks := leak.Mark(t)
	n, err := runtime.New()
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{}, 1)
	release := make(chan struct{})
	var finished atomic.Bool
	mustAdd(t, n, "cl:block", func(ctx context.Context, r runtime.Request) (any, error) {
		started <- struct{}{}
		<-release
		finished.Store(true)
		return "done", nil
	})
	mustAdd(t, n, "cl:fast", replyMsg("fast"))

	type out struct {
		v   any
		err error
	}
	callDone := make(chan out, 1)
	go func() {
		res, err := n.Act(context.Background(), "cl:block", nil)
		callDone <- out{res.Value(), err}
	}()
	wait(t, started, "the handler to start")

	// Shutdown gives up when its ctx expires, with the ctx's error.
	ctx, cancel := context.WithTimeout(t.Context(), time.Millisecond)
	defer cancel()
	if err := n.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Shutdown with an expiring ctx = %v, want context.DeadlineExceeded", err)
	}
	cctx, ccancel := context.WithCancel(t.Context())
	ccancel()
	if err := n.Shutdown(cctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Shutdown with a cancelled ctx = %v, want context.Canceled", err)
	}

	// The node is closed for new work.
	closed := []struct {
		name string
		call func() error
	}{
		{"Act", func() error { _, err := n.Act(t.Context(), "cl:fast", nil); return err }},
		{"Act no match", func() error { _, err := n.Act(t.Context(), "cl:none", nil); return err }},
		{"Act with Default", func() error { _, err := n.Act(t.Context(), "cl:none", nil, runtime.Default(1)); return err }},
		{"ActE", func() error { _, err := n.ActE(t.Context(), "cl:fast", nil); return err }},
		{"ActE NoReply", func() error { _, err := n.ActE(t.Context(), "cl:fast", nil, runtime.NoReply()); return err }},
		{"Client", func() error {
			_, err := runtime.NewClient[point, point](n, "cl:fast").Call(t.Context(), &point{})
			return err
		}},
		{"Add", func() error { return n.Add("cl:new", replyMsg(1)) }},
		{"Add Override", func() error { return n.Add("cl:fast", replyMsg(1), runtime.Override()) }},
	}
	for _, c := range closed {
		t.Run(c.name+" after close", func(t *testing.T) {
			err := c.call()
			wantCode(t, err, runtime.CodeUnavailable)
			if !errors.Is(err, runtime.ErrClosed) || !errors.Is(err, runtime.ErrUnavailable) {
				t.Errorf("errors.Is(%v, ErrClosed/ErrUnavailable) = false", err)
			}
		})
	}

	// Close waits for the running handler.
	closeDone := make(chan error, 1)
	go func() { closeDone <- n.Close() }()
	close(release)
	if err := wait(t, closeDone, "Close"); err != nil {
		t.Errorf("Close: %v", err)
	}
	if !finished.Load() {
		t.Error("Close returned before the running handler finished")
	}
	if o := wait(t, callDone, "the running call"); o.err != nil || o.v != "done" {
		t.Errorf("the call running during Close = %v, %v; want done", o.v, o.err)
	}

	// Close and Shutdown are idempotent, whatever the ctx.
	for i := range 3 {
		if err := n.Close(); err != nil {
			t.Errorf("Close #%d: %v", i+2, err)
		}
		if err := n.Shutdown(cctx); err != nil {
			t.Errorf("Shutdown(cancelled ctx) on a drained node: %v", err)
		}
	}
	checkLeaks()
}

func TestClose_WaitsForNoReply(t *testing.T) {
	checkLeaks := leak.Mark(t)
	n, err := runtime.New()
	if err != nil {
		t.Fatal(err)
	}
	const calls = 50
	var runs atomic.Int32
	gate := make(chan struct{})
	mustAdd(t, n, "nr:count", func(ctx context.Context, r runtime.Request) (any, error) {
		<-gate
		runs.Add(1)
		return nil, nil
	})
	for i := range calls {
		if _, err := n.ActE(t.Context(), "nr:count", i, runtime.NoReply()); err != nil {
			t.Fatalf("NoReply call %d: %v", i, err)
		}
	}
	closeDone := make(chan error, 1)
	go func() { closeDone <- n.Close() }()
	close(gate)
	if err := wait(t, closeDone, "Close"); err != nil {
		t.Fatal(err)
	}
	if got := runs.Load(); got != calls {
		t.Errorf("Close returned after %d of %d no-reply handlers", got, calls)
	}
	checkLeaks()
}

func TestClose_Empty(t *testing.T) {
	n, err := runtime.New()
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Shutdown(t.Context()); err != nil {
		t.Errorf("Shutdown of an idle node: %v", err)
	}
	// A node whose Shutdown ctx is already done still closes cleanly when
	// nothing is running.
	m, err := runtime.New()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	for i := range 20 {
		if err := m.Shutdown(ctx); err != nil {
			t.Fatalf("Shutdown #%d (cancelled ctx, idle node) = %v, want nil", i, err)
		}
	}
	var nilCtx context.Context
	if err := m.Shutdown(nilCtx); err != nil {
		t.Errorf("Shutdown(nil) = %v", err)
	}
}

// TestTargetCache_Bound calls with more distinct pattern strings than the
// node caches, so the cache starts over; answers stay right.
func TestTargetCache_Bound(t *testing.T) {
	n := newTestNode(t)
	mustAdd(t, n, "tc:1", replyMsg("wide"))
	mustAdd(t, n, "tc:1,i:7", replyMsg("seven"))
	for i := range 5000 {
		want := "wide"
		if i == 7 {
			want = "seven"
		}
		res, err := n.ActE(t.Context(), fmt.Sprintf("tc:1,i:%d", i), nil)
		if err != nil || res.Value() != want {
			t.Fatalf("ActE #%d = %v, %v; want %s", i, res.Value(), err, want)
		}
	}
	if ok, err := n.Remove("tc:1,i:7"); !ok || err != nil {
		t.Fatalf("Remove = %v, %v", ok, err)
	}
	for range 2 {
		if res, err := n.ActE(t.Context(), "tc:1,i:7", nil); err != nil || res.Value() != "wide" {
			t.Fatalf("after Remove: ActE = %v, %v; want wide", res.Value(), err)
		}
	}
}

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
				"Client": func() error {
					_, err := runtime.NewClient[point, point](n, p).Call(t.Context(), &point{})
					return err
				},
			}
			for name, call := range calls {
				t.Run(fmt.Sprintf("%s(%q)", name, p), func(t *testing.T) {
					err := call()
					var perr *runtime.ParseError
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
				err = n.AddPattern(runtime.MustParsePattern("nh:1"), h, runtime.Override())
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
		c := runtime.NewClient[point, string](n, "no:1", nil)
		if res, err := c.Call(t.Context(), &point{}, nil); err != nil || *res != "ok" {
			t.Errorf("Client with nil options = %v, %v", res, err)
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
		if res, err := runtime.NewClient[point, string](n, "ctx:1").Call(nilCtx, &point{}); err != nil || *res != "ok" {
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
					_, err := runtime.NewClient[point, string](n, "ctx:1").Call(c.ctx, &point{})
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
		c := runtime.NewClient[point, point](n, "to:1", runtime.Timeout(time.Hour))
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
		if d := wait(t, got, "the no-reply handler"); !d.ok || d.t.Before(start.Add(time.Hour)) {
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

// TestConcurrency calls the node from many goroutines while others add,
// override and remove patterns. Every answer must come from the handler of
// the pattern asked for, or be NotFound; never another handler's. Run it
// with -race.
func TestConcurrency(t *testing.T) {
	n := newTestNode(t)
	const (
		services = 4
		callers  = 6
		rounds   = 300
		churn    = 150
	)
	// svc:fixed never changes.
	mustAdd(t, n, "svc:fixed", func(ctx context.Context, r runtime.Request) (any, error) { return "fixed", nil })
	handler := func(svc int, gen string) runtime.Handler {
		return func(ctx context.Context, r runtime.Request) (any, error) {
			return fmt.Sprintf("%d/%s", svc, gen), nil
		}
	}
	valid := func(svc int, v any) bool {
		s, ok := v.(string)
		return ok && (s == fmt.Sprintf("%d/add", svc) || s == fmt.Sprintf("%d/override", svc))
	}

	var wg sync.WaitGroup
	errc := make(chan error, callers*services+services)
	report := func(err error) {
		select {
		case errc <- err:
		default:
		}
	}
	for svc := range services {
		p := fmt.Sprintf("svc:%d,cmd:get", svc)
		wg.Go(func() {
			for i := range churn {
				if err := n.Add(p, handler(svc, "add")); err != nil && runtime.CodeOf(err) != runtime.CodeAlreadyExists {
					report(fmt.Errorf("Add(%q): %w", p, err))
					return
				}
				if i%2 == 0 {
					if err := n.Add(p, handler(svc, "override"), runtime.Override()); err != nil {
						report(fmt.Errorf("Add(%q, Override): %w", p, err))
						return
					}
				}
				if i%3 != 0 {
					if _, err := n.Remove(p); err != nil {
						report(fmt.Errorf("Remove(%q): %w", p, err))
						return
					}
				}
				// Unrelated patterns come and go too.
				q := fmt.Sprintf("other:%d,n:%d", svc, i)
				if err := n.Add(q, handler(-1, "other")); err != nil {
					report(fmt.Errorf("Add(%q): %w", q, err))
					return
				}
				if _, err := n.Remove(q); err != nil {
					report(fmt.Errorf("Remove(%q): %w", q, err))
					return
				}
			}
		})
	}
	for c := range callers {
		wg.Go(func() {
			ctx := context.Background()
			clients := make([]*runtime.Client[map[string]any, string], services)
			for svc := range services {
				clients[svc] = runtime.NewClient[map[string]any, string](n, fmt.Sprintf("svc:%d,cmd:get", svc))
			}
			for i := range rounds {
				svc := (c + i) % services
				var v any
				var err error
				switch i % 4 {
				case 0:
					var res runtime.Result
					res, err = n.Act(ctx, fmt.Sprintf("svc:%d", svc), map[string]any{"cmd": "get"})
					v = res.Value()
				case 1:
					var res runtime.Result
					res, err = n.ActE(ctx, fmt.Sprintf("svc:%d,cmd:get", svc), nil)
					v = res.Value()
				case 2:
					var res runtime.Result
					res, err = n.ActE(ctx, fmt.Sprintf("svc:%d", svc), map[string]any{"cmd": "get"}, runtime.Mixin("cmd"))
					v = res.Value()
				case 3:
					var out *string
					out, err = clients[svc].Call(ctx, &map[string]any{})
					if out != nil {
						v = *out
					}
				}
				switch {
				case err != nil && runtime.CodeOf(err) != runtime.CodeNotFound:
					report(fmt.Errorf("call svc %d: unexpected error %w", svc, err))
					return
				case err == nil && !valid(svc, v):
					report(fmt.Errorf("call svc %d answered by %v", svc, v))
					return
				}
				if res, err := n.ActE(ctx, "svc:fixed", nil); err != nil || res.Value() != "fixed" {
					report(fmt.Errorf("svc:fixed = %v, %v", res.Value(), err))
					return
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
}
