package runtime

import (
	"sync"
	"unsafe"

	"google.golang.org/protobuf/proto"
)

// The package's pools and its uses of unsafe, each with the invariant
// that makes it safe. Who owns a message's memory, and when it may be
// reused, is [Message]'s rule.

// outMessage is a Message with room for the metadata the node itself
// sends (caller, payload type, pattern pairs, call id and token), so that
// both take one allocation.
type outMessage struct {
	Message
	meta [5]MetaPair
	id   [8]byte // the call id's bytes, which a meta value points into
}

// outMessages pools the messages of remote calls. A call's message ends
// when callRemote returns: the runtime keeps nothing of it, and the
// connections that had it keep nothing of it either unless one may have
// (m.lent: Message's doc says when), and then the message is left to the
// collector.
var outMessages sync.Pool

func getOutMessage() *outMessage {
	if om, ok := outMessages.Get().(*outMessage); ok {
		return om
	}
	return new(outMessage)
}

func putOutMessage(om *outMessage) {
	if om.lent {
		return
	}
	*om = outMessage{} // nothing of the call stays reachable
	outMessages.Put(om)
}

// idString returns the call id's bytes as a string without a copy. The
// string aliases om.id: outgoing writes id before it makes the string,
// and nothing writes it again until putOutMessage zeroes the record, once
// nothing holds the call's message (a message a connection may keep is
// never put back).
func (om *outMessage) idString() string { return bytesString(om.id[:]) }

// remoteCalls pools the state of remote calls: a call's ends when
// callRemote returns, and nothing else holds it.
var remoteCalls sync.Pool

func getRemoteCall(n *Node, r *route, m *Message, cfg *callConfig) *remoteCall {
	c, _ := remoteCalls.Get().(*remoteCall)
	if c == nil {
		c = new(remoteCall)
		c.skipFn = c.skip
	}
	c.n, c.r, c.m, c.cfg, c.refeed = n, r, m, cfg, m.Flags&FlagKeep != 0
	c.tried = c.buf[:0]
	return c
}

func putRemoteCall(c *remoteCall) {
	fn := c.skipFn
	*c = remoteCall{skipFn: fn} // nothing of the call stays reachable
	remoteCalls.Put(c)
}

// releaseReply gives the record of res's reply back to its connection
// when that is a [ReplyReleaser]; res must not be used afterwards. The
// caller is Client.Call, when [Message]'s rule lets the node give a
// reply back.
func releaseReply(res Result) {
	r, ok := res.v.(*raw)
	if !ok || r.pool == nil {
		return
	}
	// pool is set only on a reply's view, its in field (see send and
	// answer): r is the in of the reply to release, and the reply is
	// found from it by in's offset in a Message.
	m := (*Message)(unsafe.Add(unsafe.Pointer(r), -int(unsafe.Offsetof(Message{}.in))))
	p := r.pool
	r.pool = nil
	p.ReleaseReply(m)
}

// bytesString returns b as a string without a copy. Nothing may write b
// afterwards: its callers make the string of bytes written once (a call's
// id, a stored answer's own copy of its strings).
func bytesString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// dedupSlotSize is the memory of a de-duplication slot (see
// dedupAnswerCost).
const dedupSlotSize = int(unsafe.Sizeof(dedupSlot{}))

// streamBufs pools the buffers a remote stream marshals a protobuf
// message into. A transport's stream Send copies the payload into its
// frame and keeps nothing of it (streamconn's contract), so the buffer
// is the sender's again once Send returns. Buffers larger than
// maxStreamBuf are left to the collector.
var streamBufs sync.Pool

const maxStreamBuf = 1 << 20

// encodeStream encodes msg for a stream's Send: a protobuf message into a
// pooled buffer (give it back with putStreamBuf once sent), anything else
// as encodePayload does (buf nil).
func encodeStream(msg any) (codec Codec, payload []byte, typ string, buf *[]byte, err error) {
	pm, ok := msg.(proto.Message)
	if !ok {
		codec, payload, typ, err = encodePayload(msg)
		return codec, payload, typ, nil, err
	}
	buf, _ = streamBufs.Get().(*[]byte)
	if buf == nil {
		buf = new([]byte)
	}
	b, err := proto.MarshalOptions{}.MarshalAppend((*buf)[:0], pm)
	if err != nil {
		putStreamBuf(buf)
		return 0, nil, "", nil, Errorf(CodeInternal, "wizard: encode %T: %v", msg, err)
	}
	*buf = b
	return CodecProto, b, string(pm.ProtoReflect().Descriptor().FullName()), buf, nil
}

func putStreamBuf(buf *[]byte) {
	if buf == nil || cap(*buf) > maxStreamBuf {
		return
	}
	streamBufs.Put(buf)
}
