package tcp_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/transporttest"
	"github.com/wizardmesh/wizard/runtime/internal/wire"
)

// TestRemoteErrorTexts: what a remote caller reads in an error names no
// node id and no Go type, and repeats at most the first 128 bytes of a
// pattern.
func TestRemoteErrorTexts(t *testing.T) {
	const id = "node-id-to-keep-inside"
	srv := newServer(t, runtime.WithID(id), runtime.WithMaxPatternSize(4<<20, 1<<20))
	type sum struct{ A, B float64 }
	transporttest.MustAdd(t, srv, "role:dec,cmd:typed", runtime.NewUnaryHandler(func(ctx context.Context, r *wrapperspb.Int64Value) (*wrapperspb.Int64Value, error) {
		return r, nil
	}))
	transporttest.MustAdd(t, srv, "role:dec,cmd:struct", runtime.NewUnaryHandler(func(ctx context.Context, r *sum) (*sum, error) { return r, nil }))
	transporttest.MustAdd(t, srv, "role:dec,cmd:map", func(ctx context.Context, r runtime.Request) (any, error) {
		var m map[string]any
		return m, r.Decode(&m)
	})
	transporttest.MustAdd(t, srv, "role:dec,cmd:result", func(ctx context.Context, r runtime.Request) (any, error) { return make(chan int), nil })
	transporttest.MustAdd(t, srv, "role:dec,cmd:gone", func(ctx context.Context, r runtime.Request) (any, error) { return nil, nil })
	cl := newClient(t, "role:dec,cmd:gone", srv.Addr())
	// What encoding/json and %T print: Go's names for types.
	goTypes := []string{"Go value", "Go struct", "interface {}", "map[string]", "*map", "wrapperspb", "tcp_test", "chan int", "*sum", "float64"}

	t.Run("decode errors", func(t *testing.T) {
		tests := []struct {
			name, pattern string
			msg           any
			code          runtime.Code
			says          string
		}{
			{"JSON into a protobuf message", "role:dec,cmd:typed", map[string]any{"value": "x"}, runtime.CodeInvalidArgument, "decode into google.protobuf.Int64Value"},
			{"another protobuf type", "role:dec,cmd:typed", wrapperspb.String("abc"), runtime.CodeInvalidArgument, "takes google.protobuf.Int64Value, not google.protobuf.StringValue"},
			{"a string into a number", "role:dec,cmd:struct", map[string]any{"A": "x"}, runtime.CodeInvalidArgument, `field "A": JSON string where a number is expected`},
			{"an array into a map", "role:dec,cmd:map", []byte(`[1, 2]`), runtime.CodeInvalidArgument, "JSON array where an object is expected"},
			{"bad JSON", "role:dec,cmd:map", []byte(`{"a":`), runtime.CodeInvalidArgument, "bad JSON at offset"},
			{"a result that cannot be encoded", "role:dec,cmd:result", nil, runtime.CodeInternal, "the handler's result cannot be encoded"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				_, err := cl.ActE(t.Context(), tt.pattern, tt.msg)
				transporttest.WantCode(t, err, tt.code)
				t.Log(err)
				if !strings.Contains(err.Error(), tt.says) {
					t.Errorf("%q does not say %q", err, tt.says)
				}
				for _, g := range goTypes {
					if strings.Contains(err.Error(), g) {
						t.Errorf("%q names a Go type (%q)", err, g)
					}
				}
			})
		}
	})

	t.Run("not found", func(t *testing.T) {
		if ok, err := srv.Remove("role:dec,cmd:gone"); !ok || err != nil {
			t.Fatal(ok, err)
		}
		// The client still routes it there: the server answers.
		_, err := cl.ActE(t.Context(), "role:dec,cmd:gone", nil)
		transporttest.WantCode(t, err, runtime.CodeNotFound)
		if !strings.Contains(err.Error(), `has no handler for "cmd:gone,role:dec"`) || strings.Contains(err.Error(), id) {
			t.Errorf("%q: want the remote node's answer, without its id", err)
		}
		if !errors.Is(err, runtime.ErrNoHandler) {
			t.Errorf("%q does not match runtime.ErrNoHandler", err)
		}
		testwait.Until(t, "the client drops the removed pattern", func() bool { return !transporttest.Routes(cl, "role:dec,cmd:gone") })
	})

	t.Run("patterns echoed", func(t *testing.T) {
		raw := dialRaw(t, srv.Addr())
		raw.handshake()
		huge := "role:none,x:" + strings.Repeat("a", mib)
		for _, tt := range []struct {
			name, pattern string
			code          runtime.Code
			says          string
		}{
			{"not found", huge, runtime.CodeNotFound, `has no handler for "role:none,x:aaa`},
			{"malformed at its end", huge + ",", runtime.CodeInvalidArgument, "at offset 1048589"},
			{"malformed at its start", ",," + huge, runtime.CodeInvalidArgument, "at offset 0"},
		} {
			t.Run(tt.name, func(t *testing.T) {
				codes, msgs := raw.exchange(func(int) *wire.Frame { return &wire.Frame{Pattern: tt.pattern} }, 1)
				if codes[tt.code] != 1 {
					t.Fatalf("answers %v, want %v", codes, tt.code)
				}
				msg := msgs[0]
				t.Log(msg)
				if !strings.Contains(msg, tt.says) || !strings.Contains(msg, "… (") || strings.Contains(msg, id) {
					t.Errorf("%.300q: want it to say %q, cut short, with no node id", msg, tt.says)
				}
				if len(msg) > 400 {
					t.Errorf("a message of %d bytes: %.300q…", len(msg), msg)
				}
			})
		}
	})
}
