package runtime_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/wizardmesh/wizard/runtime"
)

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
				Get:     map[string]any{"role": "o", "cmd": "get", "v": 2.0, "meta$": nil},
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
			_, err := newClient[point, point](t, n, "c:1").Call(t.Context(), &point{})
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
