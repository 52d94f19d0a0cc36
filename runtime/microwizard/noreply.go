package microwizard

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync"

	"github.com/wizardmesh/wizard/runtime/internal/bridge"
)

// fireAndForget posts no-reply calls over Seneca's HTTP wire, as
// seneca-transport's HTTP client does with sync false: the caller goes on
// once the request is written, and the answer (HTTP has no way to ask for
// none) is read and dropped in the background. At most max are in the
// background per connection; each is bounded by the serve timeout, and
// all end when the connection closes.
type fireAndForget struct {
	slots  chan struct{}
	ctx    context.Context // cancelled by stop
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newFireAndForget(max int) *fireAndForget {
	f := &fireAndForget{slots: make(chan struct{}, max)}
	f.ctx, f.cancel = context.WithCancel(context.Background())
	return f
}

// stop ends the requests in the background and waits for them.
func (f *fireAndForget) stop() {
	f.cancel()
	f.wg.Wait()
}

// post sends req in the background and returns once it is written, or
// failed before. req's ctx is replaced: the request outlives the call
// (which a cancelled ctx would abort, cancelling the remote handler too),
// up to c's serve timeout. ctx bounds the wait for the write.
func (f *fireAndForget) post(ctx context.Context, c *httpConn, req *http.Request, where string) error {
	select {
	case f.slots <- struct{}{}:
	default:
		return bridge.NotSent(where, fmt.Errorf("%d no-reply calls waiting for their answers, the bound", cap(f.slots)))
	}
	bg, cancel := context.WithTimeout(context.WithoutCancel(req.Context()), c.t.serveTimeout)
	stop := context.AfterFunc(f.ctx, cancel)
	written := make(chan error, 1)
	var once sync.Once
	tell := func(err error) { once.Do(func() { written <- err }) }
	bg = httptrace.WithClientTrace(bg, &httptrace.ClientTrace{WroteRequest: func(i httptrace.WroteRequestInfo) {
		if i.Err != nil {
			tell(bridge.Lost(where, i.Err)) // part of it may have gone
			return
		}
		tell(nil)
	}})
	req = req.WithContext(bg)
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		defer func() { <-f.slots }()
		defer stop()
		defer cancel()
		res, err := c.cl.Do(req)
		if err != nil {
			var op *net.OpError
			if errors.As(err, &op) && op.Op == "dial" {
				tell(bridge.NotSent(where, err))
				return
			}
			tell(bridge.Lost(where, err))
			return
		}
		tell(nil)
		io.Copy(io.Discard, io.LimitReader(res.Body, int64(c.t.maxLine)+1))
		res.Body.Close()
	}()
	select {
	case err := <-written:
		return err
	case <-ctx.Done():
		return ctx.Err() // the request goes on, bounded
	}
}
