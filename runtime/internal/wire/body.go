package wire

// Body is a payload encoded as its frame is: straight into the frame's
// buffer, after the frame's header, instead of being encoded apart and
// then copied (see [Frame.Body]).
type Body interface {
	// Len is the size of the payload in bytes.
	Len() int
	// AppendTo appends the payload, exactly Len bytes, to dst and returns
	// the extended slice.
	AppendTo(dst []byte) []byte
}

// payloadLen is the size of f's payload: its Body's, when it has one.
func (f *Frame) payloadLen() int {
	if f.Body != nil {
		return f.Body.Len()
	}
	return len(f.Payload)
}
