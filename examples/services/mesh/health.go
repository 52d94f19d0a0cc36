package mesh

import (
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/health"
)

// DrainTimeout bounds a served node's graceful shutdown: leaving the
// mesh, goaway, and the calls in flight finishing. A Kubernetes pod's
// terminationGracePeriodSeconds covers its preStop delay plus this.
const DrainTimeout = 10 * time.Second

// probes is the HTTP server of a node's probes; nil when none is served.
type probes struct {
	srv *http.Server
	ln  net.Listener
}

// serveHealth serves n's probes on addr; none for "".
func serveHealth(addr string, n *runtime.Node) (*probes, error) {
	if addr == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("-health-addr: %w", err)
	}
	p := &probes{srv: &http.Server{Handler: health.Handler(n), ReadHeaderTimeout: 5 * time.Second}, ln: ln}
	go p.srv.Serve(ln)
	return p, nil
}

// describe is ", health ADDR", or "" without probes.
func (p *probes) describe() string {
	if p == nil {
		return ""
	}
	return ", health " + p.ln.Addr().String()
}

// close stops the probes' server, once the node has shut down: probes
// sent while it drained were answered not ready.
func (p *probes) close() error {
	if p == nil {
		return nil
	}
	return p.srv.Close()
}
