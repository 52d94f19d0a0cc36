package health_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/health"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/leak"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
)

// probe is what one request to the handler answered.
type probe struct {
	Code int
	Body string
}

func get(h http.Handler, method, path string) probe {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	return probe{rec.Code, rec.Body.String()}
}

func newNode(t *testing.T) *runtime.Node {
	t.Helper()
	n, err := runtime.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

func TestHandler(t *testing.T) {
	h := health.Handler(newNode(t))
	serving := `{"status":"serving"}` + "\n"
	for _, tc := range []struct {
		name, method, path string
		want               probe
	}{
		{"ready", http.MethodGet, health.ReadyPath, probe{200, serving}},
		{"live", http.MethodGet, health.LivePath, probe{200, serving}},
		{"ready head", http.MethodHead, health.ReadyPath, probe{200, ""}},
		{"post", http.MethodPost, health.ReadyPath, probe{405, "method not allowed\n"}},
		{"other path", http.MethodGet, "/metrics", probe{404, "404 page not found\n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, get(h, tc.method, tc.path)); diff != "" {
				t.Errorf("%s %s (-want +got):\n%s", tc.method, tc.path, diff)
			}
		})
	}
}

// TestShutdown: readiness turns 503 as soon as Shutdown begins, while the
// node still finishes the call in flight and liveness stays 200; after
// Shutdown both say not_serving, readiness 503.
func TestShutdown(t *testing.T) {
	checkLeaks := leak.Mark(t)
	n, err := runtime.New()
	if err != nil {
		t.Fatal(err)
	}
	h := health.Handler(n)
	started, release := make(chan struct{}, 1), make(chan struct{})
	if err := n.Add("hs:block", func(ctx context.Context, r runtime.Request) (any, error) {
		started <- struct{}{}
		<-release
		return "done", nil
	}); err != nil {
		t.Fatal(err)
	}
	called := make(chan error, 1)
	go func() {
		res, err := n.Act(context.Background(), "hs:block", nil)
		if err == nil && res.Value() != "done" {
			t.Errorf("the call in flight answered %v, want done", res.Value())
		}
		called <- err
	}()
	testwait.Recv(t, started)
	if got := get(h, http.MethodGet, health.ReadyPath); got.Code != 200 {
		t.Fatalf("ready before Shutdown: %+v, want 200", got)
	}

	shut := make(chan error, 1)
	go func() { shut <- n.Shutdown(context.Background()) }()
	testwait.Until(t, "readiness 503 once Shutdown begins", func() bool {
		return get(h, http.MethodGet, health.ReadyPath).Code == http.StatusServiceUnavailable
	})
	draining := `{"status":"draining"}` + "\n"
	if diff := cmp.Diff(probe{503, draining}, get(h, http.MethodGet, health.ReadyPath)); diff != "" {
		t.Errorf("ready while draining (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(probe{200, draining}, get(h, http.MethodGet, health.LivePath)); diff != "" {
		t.Errorf("live while draining (-want +got):\n%s", diff)
	}
	select {
	case err := <-called:
		t.Fatalf("the call in flight ended before its handler returned: %v", err)
	case err := <-shut:
		t.Fatalf("Shutdown returned with a call in flight: %v", err)
	default:
	}

	close(release)
	if err := testwait.Recv(t, called); err != nil {
		t.Errorf("the call in flight while draining: %v", err)
	}
	if err := testwait.Recv(t, shut); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	notServing := `{"status":"not_serving"}` + "\n"
	if diff := cmp.Diff(probe{503, notServing}, get(h, http.MethodGet, health.ReadyPath)); diff != "" {
		t.Errorf("ready after Shutdown (-want +got):\n%s", diff)
	}
	checkLeaks()
}
