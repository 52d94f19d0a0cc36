package runtime

// JSON returns the result's JSON text as it arrived from another node, and
// true; or nil and false for a result of another codec, one without a
// payload, or one that never left this process (read those with
// [Result.Decode]). The text is the sender's, not validated here, and
// shared with the Result: read it, do not modify it. A proxy that passes
// an answer on as JSON reads it this way without decoding it.
func (r Result) JSON() ([]byte, bool) {
	if rw, ok := r.v.(*raw); ok && rw.codec == CodecJSON {
		return rw.data, true
	}
	return nil, false
}
