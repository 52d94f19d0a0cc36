package gateway

import (
	"net/http"
	"strconv"
)

// readiness is what a verifier that loads keys tells /readyz: nil once
// its keys are loaded.
type readiness interface{ ready() error }

// serveHealth answers /healthz: 200 while the process serves.
func (g *Gateway) serveHealth(w http.ResponseWriter, r *http.Request) int {
	return writeProbe(w, http.StatusOK, `{"status":"ok"}`)
}

// serveReady answers /readyz: 200 once the gateway can be useful, 503
// (with why) before: the node serving and joined to a mesh (it routes a
// pattern), the verifier's keys loaded, and the gateway not shutting down.
func (g *Gateway) serveReady(w http.ResponseWriter, r *http.Request) int {
	if why := g.notReady(); why != "" {
		return writeProbe(w, http.StatusServiceUnavailable, `{"status":"not_ready","reason":`+strconv.Quote(why)+`}`)
	}
	return writeProbe(w, http.StatusOK, `{"status":"ready"}`)
}

// notReady says why the gateway is not ready, or "".
func (g *Gateway) notReady() string {
	switch {
	case g.closing.Load():
		return "shutting down"
	case !g.node.Ready():
		return "the node is " + g.node.Health().String()
	case !g.joined():
		return "no peer connected with its patterns routed yet"
	}
	if rv, ok := g.now().auth.(readiness); ok {
		if err := rv.ready(); err != nil {
			return "auth: " + err.Error()
		}
	}
	return ""
}

// joined reports whether the node routes a pattern. A connected peer is
// not enough: its patterns are routed a round trip after it connects
// (the node loads its catalog then), and a request let in between finds
// no service, a 503.
func (g *Gateway) joined() bool {
	return len(g.node.Patterns()) > 0
}

func writeProbe(w http.ResponseWriter, status int, body string) int {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write([]byte(body))
	return status
}
