// Package bridge converts between the runtime's transport messages and
// the mux's wire frames, for the stream transports (tcp, quic); it also
// words their connection errors and checks the options they share.
package bridge

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"unsafe"

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

// exchange is one call's message and frame: on the serving side the
// request message and the answer frame, on the calling side the answer
// frame and the reply message made of it.
type exchange struct {
	m runtime.Message
	f wire.Frame
	b protoBody
}

// serveExchange is the serving side's record of a request: the mux's
// record, which is the request's context and lives as long as anything
// holds that, and the part of it the context never reaches (p): the
// buffer the request was read into, the request message made of it and
// the answer frame. p is pooled: Handler marks it free when
// runtime.BodyServer.ServeMessageBody reports the request free (the rule
// is runtime.Message's), and the mux's Options.Done then gives it back
// (release), once it has encoded the answer. A p not marked free is left
// to the collector with the record.
type serveExchange struct {
	req  mux.Request
	p    *serveRoom
	free bool // set by Handler: p goes back to the pool on Done
}

// serveRoom is the pooled part of a request's record.
type serveRoom struct {
	buf mux.RequestBuf
	exchange
}

var serveRooms sync.Pool

// WithRoom returns o for a server whose handler is [Handler]'s: its
// requests' records are made with the handler's exchange beside them,
// from a pool, and given back when Handler marked them free.
func WithRoom(o mux.Options) mux.Options {
	o.Room = room
	o.Done = release
	o.RoomSize = int(unsafe.Sizeof(serveExchange{}) - unsafe.Sizeof(mux.Request{}) + unsafe.Sizeof(serveRoom{}) - unsafe.Sizeof(mux.RequestBuf{}))
	return o
}

func room() (*mux.Request, *mux.RequestBuf, any) {
	x := new(serveExchange)
	p, ok := serveRooms.Get().(*serveRoom)
	if !ok {
		p = new(serveRoom)
	}
	x.p = p
	return &x.req, &p.buf, x
}

// release is the mux's Options.Done: the answer of the request whose
// room is x is encoded, and the mux reads nothing of p again.
func release(x any) {
	sx, ok := x.(*serveExchange)
	if !ok || !sx.free {
		return
	}
	p := sx.p
	sx.p, sx.free = nil, false
	*p = serveRoom{} // nothing of the call stays reachable, nor readable by the next (past its frame's end)
	serveRooms.Put(p)
}

// callExchange is the calling side's exchange, with room for the
// answer's metadata (a reply carries its payload's type, and seldom more)
// and for a small answer's body, which the reply's Payload and metadata
// then alias: the reply is the caller's, and nothing else writes it.
//
// The records are pooled. [CallBody] takes one and returns its message
// as the reply, which from then on is its caller's: the caller may give
// it back with [ReleaseReply] (runtime.ReplyReleaser; the rule is
// runtime.Message's), or leave it to the collector. A call that returns
// no reply gives its record back itself.
type callExchange struct {
	exchange
	meta [2]wire.Meta
	body [callRoom]byte
}

// callRoom is the answer body a call has room for: a small protobuf
// result with its type's name (the record then fills its size class,
// 576 bytes).
const callRoom = 144

var callExchanges sync.Pool

func getCallExchange() *callExchange {
	if x, ok := callExchanges.Get().(*callExchange); ok {
		return x
	}
	return new(callExchange)
}

func putCallExchange(x *callExchange) {
	*x = callExchange{} // nothing of the call stays reachable, nor readable by the next
	callExchanges.Put(x)
}

// The reply is the record's first word: ReleaseReply finds the record
// from it.
var _ [0]struct{} = [unsafe.Offsetof(callExchange{}.exchange) + unsafe.Offsetof(exchange{}.m)]struct{}{}

// ReleaseReply gives back the record of m, a reply that [Call] or
// [CallBody] returned, for a later call to reuse. The caller must not
// read or write m, or anything it points to (its Payload, Error and
// Meta), afterwards, and releases a reply at most once.
func ReleaseReply(m *runtime.Message) {
	putCallExchange((*callExchange)(unsafe.Pointer(m)))
}

// wire.Meta and runtime.MetaPair have identical fields (the conversion
// below would not compile otherwise), so a slice of one is a slice of the
// other: metadata crosses the bridge without a copy.
var _ = wire.Meta(runtime.MetaPair{})

func toWire(m []runtime.MetaPair) []wire.Meta {
	if len(m) == 0 {
		return nil
	}
	return unsafe.Slice((*wire.Meta)(unsafe.Pointer(unsafe.SliceData(m))), len(m))
}

func fromWire(m []wire.Meta) []runtime.MetaPair {
	if len(m) == 0 {
		return nil
	}
	return unsafe.Slice((*runtime.MetaPair)(unsafe.Pointer(unsafe.SliceData(m))), len(m))
}
