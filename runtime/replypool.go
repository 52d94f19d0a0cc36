package runtime

import "unsafe"

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
	// answer): r is the in of the reply to release.
	m := (*Message)(unsafe.Add(unsafe.Pointer(r), -int(unsafe.Offsetof(Message{}.in))))
	p := r.pool
	r.pool = nil
	p.ReleaseReply(m)
}
