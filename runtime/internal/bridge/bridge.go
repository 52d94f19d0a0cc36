// Package bridge converts between the runtime's transport messages and
// the mux's wire frames, for the stream transports (tcp, quic); it also
// words their connection errors and checks the options they share.
package bridge

import (
	"context"
	"errors"
	"fmt"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/mux"
	"github.com/wizardmesh/wizard/runtime/internal/wire"
	"google.golang.org/protobuf/proto"
)

// Call runs one call over a mux client. where names the connection in
// errors: "wizard: <transport>: <addr>".
func Call(ctx context.Context, cl *mux.Client, m *runtime.Message, where string) (*runtime.Message, error) {
	return CallBody(ctx, cl, m, nil, 0, where)
}

// CallBody is [Call] for a message whose payload is body, of size bytes,
// still to marshal: it is marshalled straight into the request's frame.
// A nil body sends m's Payload.
func CallBody(ctx context.Context, cl *mux.Client, m *runtime.Message, body proto.Message, size int, where string) (*runtime.Message, error) {
	var f wire.Frame
	RequestFrame(&f, m)
	x := getCallExchange() // the answer frame, its metadata and body and the message made of it, in one record
	resp, out := &x.f, &x.m
	resp.Meta = x.meta[:0]
	if body != nil {
		x.b = protoBody{body, size}
		f.Body = &x.b
	}
	answered, err := cl.DoRoom(ctx, &f, resp, x.body[:])
	if !answered {
		// Nothing returned points into x, and the client writes the
		// room only when it reports the answer written (DoRoom).
		putCallExchange(x)
	}
	if err != nil {
		if errors.Is(err, wire.ErrFrameTooLarge) { // refused here, as the server refuses a large response
			return nil, runtime.NewError(runtime.CodeResourceExhausted, where+": "+mux.Detail(err))
		}
		return nil, callError(where, err)
	}
	if !answered {
		return nil, nil
	}
	if err := ReplyMessage(out, resp); err != nil {
		return nil, fmt.Errorf("%s: bad error frame: %w", where, err)
	}
	return out, nil
}

// Handler adapts a runtime.Server to a mux handler. A
// [runtime.BodyServer]'s protobuf results are marshalled straight into
// their answers' frames (as a protoBody).
func Handler(s runtime.Server) mux.Handler {
	bs, _ := s.(runtime.BodyServer)
	return func(ctx context.Context, req *wire.Frame) *wire.Frame {
		// The message handed to the node and the frame answered are the
		// request's pooled room (see WithRoom), or take one allocation;
		// mux encodes the frame before the handler's goroutine moves on
		// and keeps neither.
		var x *exchange
		sx, _ := mux.RoomOf(ctx).(*serveExchange)
		if sx != nil {
			x = &sx.p.exchange
		} else {
			x = new(exchange)
		}
		m := &x.m
		RequestMessage(m, req)
		m.Remote = remoteOf(ctx)
		if req.Flags&wire.FlagKeep != 0 {
			m.Identity = identity(ctx) // what a stored answer is bound to
		}
		var reply *runtime.Message
		var body proto.Message
		var size int
		if bs != nil {
			var free bool
			reply, body, size, free = bs.ServeMessageBody(ctx, m)
			if sx != nil && free { // free: reply took m's place
				sx.free = true // given back once the mux has encoded the answer (release)
			}
		} else {
			reply = s.ServeMessage(ctx, m)
		}
		f := &x.f
		ReplyFrame(f, reply)
		if body != nil && reply.Code == runtime.CodeOK { // a body comes with a reply that succeeded
			x.b = protoBody{body, size}
			f.Body = &x.b
		}
		return f
	}
}

// Budget returns the in-flight budget a listener shares among its
// connections for s: nil unless s is a [runtime.InFlightLimiter] with a
// limit (a node's Server is one, for runtime.WithMaxInFlight).
func Budget(s runtime.Server) *mux.Budget {
	l, ok := s.(runtime.InFlightLimiter)
	if !ok || l.MaxInFlight() <= 0 {
		return nil
	}
	return mux.NewBudget(l.MaxInFlight())
}
