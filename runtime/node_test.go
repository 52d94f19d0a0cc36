package runtime_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/wizardmesh/wizard/runtime"
)

// newTestNode returns a node that is closed when the test ends.
func newTestNode(t testing.TB, opts ...runtime.Option) *runtime.Node {
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

// mustAdd adds h to n under pattern, failing t on error.
// newClient is runtime.NewClient, failing t on an error.
func newClient[Req, Res any](t testing.TB, c runtime.Caller, pattern string, opts ...runtime.CallOption) *runtime.Client[Req, Res] {
	t.Helper()
	cl, err := runtime.NewClient[Req, Res](c, pattern, opts...)
	if err != nil {
		t.Fatalf("NewClient(%q): %v", pattern, err)
	}
	return cl
}

func mustAdd(t testing.TB, n *runtime.Node, pattern string, h runtime.Handler, opts ...runtime.HandlerOption) {
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
		{"zero max in flight means the default", []runtime.Option{runtime.WithMaxInFlight(0)}, ""},
		{"nil logger means the default", []runtime.Option{runtime.WithLogger(nil)}, ""},
		{"nil option", []runtime.Option{runtime.WithID("x"), nil}, "option 2 of 2 is nil"},
		{"negative max in flight", []runtime.Option{runtime.WithMaxInFlight(-1)}, "negative"},
		{"negative dedup bytes", []runtime.Option{runtime.WithDedupBytes(-1)}, "WithDedupBytes(-1): the bound cannot be negative"},
		{"nil handler interceptor", []runtime.Option{runtime.WithHandlerInterceptors(okIC, nil)}, "nil handler interceptor"},
		{"nil call interceptor", []runtime.Option{runtime.WithCallInterceptors(nil)}, "nil call interceptor"},
		{"listen without a transport", []runtime.Option{runtime.WithListen("127.0.0.1:0")}, "WithListen and WithDiscovery need WithTransport"},
		{"negative default timeout", []runtime.Option{runtime.WithTransport(nopTransport{}), runtime.WithDefaultTimeout(-time.Second)}, "WithDefaultTimeout(-1s): the timeout cannot be negative"},
		{"negative catalog refresh", []runtime.Option{runtime.WithTransport(nopTransport{}), runtime.WithCatalogRefresh(-time.Second)}, "WithCatalogRefresh(-1s): the interval cannot be negative"},
		{"negative dedup size", []runtime.Option{runtime.WithTransport(nopTransport{}), runtime.WithDedup(-1, 0)}, "WithDedup(-1, 0s): the size and the time cannot be negative"},
		{"zero dedup means the default", []runtime.Option{runtime.WithTransport(nopTransport{}), runtime.WithDedup(0, 0)}, ""},
		{"dedup off", []runtime.Option{runtime.WithTransport(nopTransport{}), runtime.WithoutDedup()}, ""},
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

// nopTransport is a transport that is never used: New's validation runs
// before it listens or dials.
type nopTransport struct{}

func (nopTransport) Name() string { return "nop" }
func (nopTransport) Listen(string, runtime.Server) (runtime.Listener, error) {
	return nil, errors.New("nop: no listening")
}
func (nopTransport) Dial(context.Context, string) (runtime.Conn, error) {
	return nil, errors.New("nop: no dialling")
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
