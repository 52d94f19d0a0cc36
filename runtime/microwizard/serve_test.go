package microwizard_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/leak"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testlog"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testpb"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
	"github.com/wizardmesh/wizard/runtime/microwizard"
)

// newTransport returns a transport made with opts, which must be valid.
func newTransport(t testing.TB, opts ...microwizard.Option) *microwizard.Transport {
	t.Helper()
	tr, err := microwizard.New(append([]microwizard.Option{microwizard.WithLogger(new(testlog.Buffer).Logger())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// newNode returns a node on tr listening on 127.0.0.1, closed when the
// test ends.
func newNode(t testing.TB, tr *microwizard.Transport, opts ...runtime.Option) *runtime.Node {
	t.Helper()
	n, err := runtime.New(append([]runtime.Option{runtime.WithTransport(tr), runtime.WithListen("127.0.0.1:0"), runtime.WithLogger(new(testlog.Buffer).Logger())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

func mustAdd(t testing.TB, n *runtime.Node, pattern string, h runtime.Handler, opts ...runtime.HandlerOption) {
	t.Helper()
	if err := n.Add(pattern, h, opts...); err != nil {
		t.Fatal(err)
	}
}

// clientResult is one line of mw-client.mjs.
type clientResult struct {
	Name string         `json:"name"`
	Res  map[string]any `json:"res"`
	Err  *struct {
		Name    string `json:"name"`
		Message string `json:"message"`
		Code    string `json:"code"`
		Stack   string `json:"stack"`
	} `json:"err"`
	Done bool `json:"done"`
}

// runClient runs mw-client.mjs against n with the scenarios named and
// returns its results by name.
func runClient(t *testing.T, n *runtime.Node, scenarios ...string) map[string]clientResult {
	t.Helper()
	_, port, _ := strings.Cut(n.Addr(), "127.0.0.1:")
	p := startNode(t, "mw-client.mjs", append([]string{port}, scenarios...)...)
	got := map[string]clientResult{}
	for {
		var r clientResult
		p.next(t, &r)
		if r.Done {
			return got
		}
		got[r.Name] = r
	}
}

// TestMicroWizardClientActsOnGo: a real MicroWizard client, configured
// with client({type: 'tcp', pin}), calls Go handlers with act, actE with a
// mixin, sync:false, a typed (protobuf) handler through its JSON form, a
// handler that fails (message and name kept, no stack) and one that
// outlasts the client's timeout.
func TestMicroWizardClientActsOnGo(t *testing.T) {
	needNode(t, "microwizard")
	leak.Check(t)
	n := newNode(t, newTransport(t))
	mustAdd(t, n, "role:go,cmd:sum", func(ctx context.Context, req runtime.Request) (any, error) {
		a, _ := req.Float64("a")
		b, _ := req.Float64("b")
		return map[string]any{"answer": a + b, "by": "go"}, nil
	})
	mustAdd(t, n, "role:go,cmd:echo", func(ctx context.Context, req runtime.Request) (any, error) {
		return map[string]any{"got": req.Msg(), "pattern": req.Pattern().String()}, nil
	})
	mustAdd(t, n, "role:go,cmd:typed", runtime.NewUnaryHandler(func(ctx context.Context, in *testpb.SumRequest) (*testpb.SumResponse, error) {
		var s float64
		for _, v := range in.Values {
			s += v
		}
		return &testpb.SumResponse{Sum: s}, nil
	}))
	notes := make(chan float64, 1)
	mustAdd(t, n, "role:go,cmd:note", func(ctx context.Context, req runtime.Request) (any, error) {
		v, _ := req.Float64("v")
		notes <- v
		return nil, nil
	})
	mustAdd(t, n, "role:go,cmd:fail", func(ctx context.Context, req runtime.Request) (any, error) {
		return nil, runtime.NewError(runtime.CodeFailedPrecondition, "the go handler says no")
	})
	release := make(chan struct{})
	defer close(release)
	mustAdd(t, n, "role:go,cmd:slow", func(ctx context.Context, req runtime.Request) (any, error) {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return map[string]any{"late": true}, nil
	})

	got := runClient(t, n, "act", "actE", "typed", "nosync", "fail", "timeout")
	if r := got["act"]; r.Err != nil || r.Res["answer"] != 3.0 || r.Res["by"] != "go" {
		t.Errorf("act: got %+v, want answer 3 by go", r)
	}
	if diff := cmp.Diff(map[string]any{"got": map[string]any{"kind": "mix", "v": 7.0}, "pattern": "cmd:echo,role:go"}, got["actE"].Res); diff != "" {
		t.Errorf("actE with mixin: the handler gets d alone (-want +got):\n%s", diff)
	}
	if r := got["typed"]; r.Err != nil || r.Res["sum"] != 3.5 {
		t.Errorf("typed: got %+v, want sum 3.5", r)
	}
	if v := testwait.Recv(t, notes); v != 42 {
		t.Errorf("sync:false: the handler got v=%v, want 42", v)
	}
	if r := got["nosync"]; r.Err != nil {
		t.Errorf("sync:false: got %+v, want no error", r)
	}
	if r := got["fail"]; r.Err == nil || r.Err.Message != "the go handler says no" || r.Err.Name != "Error" || r.Err.Code != "failed_precondition" {
		t.Errorf("fail: got %+v, want message, name Error and code failed_precondition", r.Err)
	} else if strings.Contains(r.Err.Stack, ".go:") {
		t.Errorf("fail: a Go stack crossed: %q", r.Err.Stack)
	}
	if r := got["timeout"]; r.Err == nil || r.Err.Message != "timeout" {
		t.Errorf("timeout: got %+v, want MicroWizard's 'timeout'", r)
	}
}

// TestMicroWizardClientOverload: a call beyond the node's in-flight
// limit is answered retry_later_err_overload, as a closing MicroWizard
// node answers.
func TestMicroWizardClientOverload(t *testing.T) {
	needNode(t, "microwizard")
	leak.Check(t)
	n := newNode(t, newTransport(t), runtime.WithMaxInFlight(1))
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	mustAdd(t, n, "role:go,cmd:block", func(ctx context.Context, req runtime.Request) (any, error) {
		started <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
		}
		return map[string]any{}, nil
	})
	// Hold the one slot with a local call.
	held := make(chan error, 1)
	go func() { _, err := n.Act(context.Background(), "role:go,cmd:block", nil); held <- err }()
	testwait.Recv(t, started)
	got := runClient(t, n, "overload")
	close(release)
	if err := testwait.Recv(t, held); err != nil {
		t.Fatal(err)
	}
	if r := got["overload"]; r.Err == nil || r.Err.Message != "retry_later_err_overload" {
		t.Errorf("overload: got %+v, want retry_later_err_overload", r)
	}
}
