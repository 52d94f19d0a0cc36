package runtime

import "google.golang.org/protobuf/proto"

// dedupShareMin is the smallest payload the de-duplication table keeps
// by reference instead of copying. The payload of an answer the node
// encoded itself (a handler's protobuf result, marshalled for that answer)
// is held by no one else and changed by no one: the transport only reads
// it. Keeping it spares a copy of every large answer; below this size a
// copy into the generation's arena is cheaper than pinning an
// allocation per answer.
const dedupShareMin = 4 << 10

// ownedPayload reports whether encodePayload encodes v into a buffer of
// its own, which nothing else holds: a protobuf message is marshalled
// afresh, while bytes, JSON bytes and a received payload are passed on
// as they are, and their owner (a handler, a frame's buffer) may reuse
// them.
func ownedPayload(v any) bool {
	_, ok := v.(proto.Message)
	return ok
}

// sharedPayload returns m's payload when a dedup slot may keep it as it
// is (see dedupShareMin), else nil.
func sharedPayload(m *Message) []byte {
	if !m.owned || len(m.Payload) < dedupShareMin {
		return nil
	}
	return m.Payload
}
