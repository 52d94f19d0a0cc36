package health

import (
	"net/http"

	"github.com/wizardmesh/wizard/runtime"
)

// The paths [Handler] answers.
const (
	// ReadyPath answers 200 while the node serves, 503 otherwise.
	ReadyPath = "/readyz"
	// LivePath answers 200 while the process answers at all.
	LivePath = "/healthz"
)

// Handler returns a handler of n's probes: [ReadyPath] and [LivePath]
// to GET and HEAD, 404 for any other path, 405 for any other method.
func Handler(n *runtime.Node) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ready bool
		switch r.URL.Path {
		case ReadyPath:
			ready = true
		case LivePath:
		default:
			http.NotFound(w, r)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		h := n.Health()
		status := http.StatusOK
		if ready && h != runtime.HealthServing {
			status = http.StatusServiceUnavailable
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(status)
		if r.Method == http.MethodGet {
			w.Write([]byte(`{"status":"` + h.String() + `"}` + "\n"))
		}
	})
}
