package gateway

import (
	"errors"
	"net/http"
	"os"
	"time"

	"github.com/wizardmesh/wizard/runtime"
)

// boundBody sets the connection's read deadline to the body's bound when
// the request has a body: net/http bounds the headers only, and a body
// trickled a byte at a time would otherwise hold the connection (and its
// goroutine and buffers) for as long as the client likes. The deadline
// covers net/http's own draining of a body the handler did not read; the
// next request on the connection gets its header deadline again.
func (g *Gateway) boundBody(w http.ResponseWriter, r *http.Request, d time.Duration) {
	if r.ContentLength == 0 || r.Body == nil || r.Body == http.NoBody {
		return
	}
	dl := time.Now().Add(d)
	// net/http's own writer, asked directly: a ResponseController (which
	// also unwraps a wrapped writer) would be allocated per request.
	if rd, ok := w.(readDeadliner); ok {
		_ = rd.SetReadDeadline(dl)
		return
	}
	// A server that is not net/http's may not support it: nothing to do.
	_ = http.NewResponseController(w).SetReadDeadline(dl)
}

// readDeadliner is the method of net/http's ResponseWriter that
// http.ResponseController calls to set the connection's read deadline.
type readDeadliner interface{ SetReadDeadline(time.Time) error }

// bodyTimedOut reports whether err is the body's read deadline passing.
func bodyTimedOut(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) }

// slowBody is the answer to a body not received within its bound.
func slowBody(d time.Duration) *apiError {
	return newAPIError(http.StatusRequestTimeout, runtime.CodeDeadlineExceeded, "the request body was not received within "+d.String())
}
