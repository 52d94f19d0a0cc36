package runtime_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/wizardmesh/wizard/runtime"
)

// metaHandler answers what its call carried: the incoming metadata and
// the outgoing metadata of its own ctx.
func metaHandler(ctx context.Context, r runtime.Request) (any, error) {
	return map[string]any{
		"in":  runtime.IncomingMetadata(ctx).String(),
		"out": runtime.OutgoingMetadata(ctx).String(),
		"src": r.Source().Node,
	}, nil
}

func TestMetadataInProcess(t *testing.T) {
	n := newTestNode(t)
	mustAdd(t, n, "role:meta,cmd:echo", metaHandler)
	// relay calls echo with its own ctx; forward copies what it received.
	mustAdd(t, n, "role:meta,cmd:relay", func(ctx context.Context, r runtime.Request) (any, error) {
		res, err := n.Act(ctx, "role:meta,cmd:echo", nil)
		return res.Value(), err
	})
	mustAdd(t, n, "role:meta,cmd:forward", func(ctx context.Context, r runtime.Request) (any, error) {
		res, err := n.Act(runtime.WithMetadata(ctx, runtime.IncomingMetadata(ctx)), "role:meta,cmd:echo", nil)
		return res.Value(), err
	})
	ctx := runtime.AppendMetadata(t.Context(), "x-user", "alice", "x-user", "bob")
	ctx = runtime.AppendMetadata(ctx, "x-raw", "\x00") // not -bin: refused
	call := func(ctx context.Context, pattern string) (map[string]any, error) {
		res, err := n.Act(ctx, pattern, nil)
		if err != nil {
			return nil, err
		}
		m, _ := res.Value().(map[string]any)
		return m, nil
	}
	good := runtime.AppendMetadata(t.Context(), "x-user", "alice", "x-user", "bob", "trace.id", "t1", "sig-bin", "\x00\x01")
	for _, tc := range []struct {
		name    string
		pattern string
		want    map[string]any
	}{
		{"echo", "role:meta,cmd:echo", map[string]any{"in": `x-user="alice" x-user="bob" trace.id="t1" sig-bin=(2 bytes)`, "out": "", "src": n.ID()}},
		{"a handler's calls carry none of it", "role:meta,cmd:relay", map[string]any{"in": "", "out": "", "src": n.ID()}},
		{"unless it copies it", "role:meta,cmd:forward", map[string]any{"in": `x-user="alice" x-user="bob" trace.id="t1" sig-bin=(2 bytes)`, "out": "", "src": n.ID()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := call(good, tc.pattern)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	if _, err := call(ctx, "role:meta,cmd:echo"); runtime.CodeOf(err) != runtime.CodeInvalidArgument || !strings.Contains(err.Error(), `metadata "x-raw": byte 0 of its value is the control character`) {
		t.Errorf("a control character in a value: %v", err)
	}
}

func TestMetadataRefused(t *testing.T) {
	n := newTestNode(t)
	mustAdd(t, n, "role:meta,cmd:echo", metaHandler)
	for _, tc := range []struct {
		name string
		kv   []string
		code runtime.Code
		msg  string
	}{
		{"upper case", []string{"X-User", "a"}, runtime.CodeInvalidArgument, `metadata key "X-User": keys are lower-case ASCII letters, digits, '-', '_' and '.' (byte 0 is 'X')`},
		{"the node's own", []string{":c", "forged"}, runtime.CodeInvalidArgument, `metadata key ":c": keys are lower-case`},
		{"empty key", []string{"", "a"}, runtime.CodeInvalidArgument, "metadata with an empty key"},
		{"odd", []string{"x-a", "1", "x-b"}, runtime.CodeInvalidArgument, `AppendMetadata: 3 strings, not key/value pairs: the key "x-b" has no value`},
		{"too large", []string{"x-big", strings.Repeat("v", 8<<10)}, runtime.CodeResourceExhausted, "the call's metadata holds 8197 bytes, more than the limit of 8192"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := n.Act(runtime.AppendMetadata(t.Context(), tc.kv...), "role:meta,cmd:echo", nil)
			if runtime.CodeOf(err) != tc.code || err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("err = %v, want %v containing %q", err, tc.code, tc.msg)
			}
		})
	}
}

func TestMetadataValues(t *testing.T) {
	ctx := runtime.AppendMetadata(t.Context(), "a", "1", "b", "2")
	ctx = runtime.AppendMetadata(ctx, "a", "3")
	md := runtime.OutgoingMetadata(ctx)
	var all []string
	for k, v := range md.All() {
		all = append(all, k+"="+v)
	}
	got := map[string]any{"get a": md.Get("a"), "values a": md.Values("a"), "len": md.Len(), "all": all, "missing": md.Get("c")}
	want := map[string]any{"get a": "1", "values a": []string{"1", "3"}, "len": 3, "all": []string{"a=1", "b=2", "a=3"}, "missing": ""}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	// A copy appended to leaves the original as it was.
	runtime.AppendMetadata(ctx, "d", "4")
	if md2 := runtime.OutgoingMetadata(ctx); md2.Len() != 3 {
		t.Errorf("appending to a derived ctx changed its parent's metadata: %v", md2)
	}
	if runtime.IncomingMetadata(ctx).Len() != 0 {
		t.Error("a caller's ctx has incoming metadata")
	}
}

// TestMetadataInterceptors: a call interceptor adds metadata; a handler
// interceptor reads it.
func TestMetadataInterceptors(t *testing.T) {
	var seen string
	n := newTestNode(t,
		runtime.WithCallInterceptors(func(next runtime.Invoker) runtime.Invoker {
			return func(ctx context.Context, c *runtime.Call) (runtime.Result, error) {
				return next(runtime.AppendMetadata(ctx, "x-from", "interceptor"), c)
			}
		}),
		runtime.WithHandlerInterceptors(func(next runtime.Handler) runtime.Handler {
			return func(ctx context.Context, r runtime.Request) (any, error) {
				seen = runtime.IncomingMetadata(ctx).Get("x-from")
				return next(ctx, r)
			}
		}))
	mustAdd(t, n, "role:meta,cmd:echo", metaHandler)
	res, err := n.Act(t.Context(), "role:meta,cmd:echo", nil)
	if err != nil {
		t.Fatal(err)
	}
	if m := res.Value().(map[string]any); seen != "interceptor" || m["in"] != `x-from="interceptor"` {
		t.Errorf("handler interceptor saw %q, handler %v", seen, m["in"])
	}
}
