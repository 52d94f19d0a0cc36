package bridge

import (
	"context"
	"errors"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/mux"
	"github.com/wizardmesh/wizard/runtime/internal/streamconn"
	"github.com/wizardmesh/wizard/runtime/internal/wire"
)

// OpenStream opens a stream on cl for a transport's Conn (see
// streamconn.Opener). Its errors start with where, as a call's do; one
// that matches runtime.ErrNotSent sent nothing.
func OpenStream(ctx context.Context, cl *mux.Client, open *wire.Frame, where string) (streamconn.Client, error) {
	cs, err := cl.OpenStream(ctx, open)
	if err != nil {
		if errors.Is(err, mux.ErrStreamsUnsupported) {
			return nil, err
		}
		if errors.Is(err, wire.ErrFrameTooLarge) {
			return nil, runtime.NewError(runtime.CodeResourceExhausted, where+": "+mux.Detail(err))
		}
		return nil, callError(where, err)
	}
	return cs, nil
}

// StreamHandler returns the stream handler a listener serves s's streams
// with, or nil (streams end at once with unimplemented) when s serves
// none.
func StreamHandler(s runtime.Server) mux.StreamHandler {
	ss, ok := s.(streamconn.Server)
	if !ok {
		return nil
	}
	return func(ctx context.Context, st *mux.ServerStream) error {
		return ss.ServeStream(ctx, servedStream{st, remoteOf(ctx)})
	}
}

// servedStream is a stream a listener serves, with what the transport
// knows of its caller's end of the connection: the node reads it as it
// reads a call's Message.Remote (Request.Source, a certificate's node id).
type servedStream struct {
	*mux.ServerStream
	remote *runtime.Remote
}

func (s servedStream) Remote() *runtime.Remote { return s.remote }
