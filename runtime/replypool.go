package runtime

import "unsafe"

// A reply record is the memory a connection returns a reply in (runtime/
// tcp's: the answer's frame, its metadata and a small answer's body, with
// the reply's Payload, Error and Meta aliasing it). A connection that
// pools its records says so with a ReleaseReply method (replyPool), and
// the ownership of a record is then:
//
//   - the connection owns it until its Call or CallBody returns it as a
//     reply, and never writes it after that;
//   - the node then owns it, and gives it back (releaseReply) at most
//     once, only when nothing the node handed out can still reach it: a
//     typed call ([Client.Call]) on a node without call interceptors,
//     for a protobuf result type, once the reply was decoded without an
//     error into a message of the caller's (protobuf's Unmarshal copies
//     bytes and strings: the message aliases nothing of the record);
//   - in every other case the record is left to the collector: a Result
//     handed to the caller (Act, ActE) or to a call interceptor, which may
//     keep it; an error reply, whose Error and details alias the record;
//     a reply that failed to decode; a non-protobuf result type (Decode
//     into an *any may return the payload as it is).
//
// Only the node releases, and only in Client.Call: the Result of that
// call reaches no code but the runtime's between the connection and the
// decode (the balancer, breakers and observers learn an attempt's code,
// never its reply).

// replyPool is a [Conn] that takes back the records of its replies.
// ReleaseReply gets a reply that the connection's Call or CallBody
// returned, once; nothing reads or writes the reply, or what it points
// to, afterwards.
type replyPool interface {
	ReleaseReply(m *Message)
}

// releaseReply gives the record of res's reply back to its connection
// when it has one that takes it (see above); res must not be used
// afterwards. The caller is Client.Call, under the rules above.
func releaseReply(res Result) {
	r, ok := res.v.(*raw)
	if !ok || r.pool == nil {
		return
	}
	// pool is set only on a reply's view, its in field (see send and
	// answer): r is the in of the reply to release.
	m := (*Message)(unsafe.Add(unsafe.Pointer(r), -int(unsafe.Offsetof(Message{}.in))))
	p := r.pool
	r.pool = nil
	p.ReleaseReply(m)
}
