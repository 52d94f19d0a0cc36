package bridge

import (
	"sync"
	"unsafe"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/mux"
	"github.com/wizardmesh/wizard/runtime/internal/wire"
)

// The package's pools and its uses of unsafe, each with the invariant
// that makes it safe: the records of calls and of served requests, and
// metadata shared between messages and frames. Who owns a message's
// memory, and when it may be reused, is runtime.Message's rule.

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
	// What a room adds to the mux's record: the exchange beside the
	// request, and the pooled part less the buffer the record counts.
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

// The reply is the record's first word (this fails to compile
// otherwise): ReleaseReply finds the record from it, and only a reply
// that CallBody returned, which is a record's, is ever released.
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
// other, with the same layout: metadata crosses the bridge without a copy,
// and the slice returned aliases m.
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
