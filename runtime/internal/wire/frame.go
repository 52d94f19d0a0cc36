package wire

import (
	"encoding/binary"
	"io"
	"math"
	"slices"
	"strconv"
	"time"
)

// DefaultMaxFrameSize is the maximum frame size used when a reader gives
// none: 4 MiB. A frame's size is the value of its length field, the number
// of bytes after it.
const DefaultMaxFrameSize = 4 << 20

// HeaderSize is the size of a frame's fixed header: the length field, type,
// flags, codec and id.
const HeaderSize = 15

// MinFrameSize is the smallest valid frame size (length field value): the
// fixed header after the length field plus three one-byte varints.
const MinFrameSize = HeaderSize - 4 + 3

// MaxFrameSize is the largest frame size the 32-bit length field can hold.
const MaxFrameSize = math.MaxUint32

// MaxMeta is the largest number of meta pairs a frame may carry. A frame
// with more is malformed: a decoder would otherwise allocate 32 bytes per
// two bytes of frame for its Meta slice.
const MaxMeta = 256

// Type is a frame's type.
type Type uint8

// The frame types.
const (
	TypeRequest  Type = 1 + iota // a call: pattern, meta, payload
	TypeResponse                 // a call's result: payload (and meta)
	TypeError                    // a call's failure: an encoded error (see AppendError)
	TypeCancel                   // the caller gave up on request ID
	TypePing                     // keep-alive probe; the peer answers TypePong with the same ID
	TypePong                     // answer to TypePing
	TypeGoAway                   // the server takes no requests with an id above ID

	// The stream frames (see the package documentation, # Streams).
	TypeStreamOpen   // client to server: opens stream ID with pattern, meta (headers) and deadline
	TypeStreamData   // either way: one message of stream ID
	TypeStreamClose  // client to server: the client sends no more data on stream ID
	TypeStreamEnd    // server to client: ends stream ID; an encoded error (code 0 = OK), meta = trailers
	TypeStreamCredit // either way: grants the peer more bytes of data on stream ID (see AppendCredit)
	TypeStreamHeader // server to client: the server's headers of stream ID, at most once, first
)

var typeNames = [...]string{"", "request", "response", "error", "cancel", "ping", "pong", "goaway",
	"stream-open", "stream-data", "stream-close", "stream-end", "stream-credit", "stream-header"}

// String returns the type's name ("request", "goaway", ...).
func (t Type) String() string {
	if t.valid() {
		return typeNames[t]
	}
	return "type(" + strconv.Itoa(int(t)) + ")"
}

func (t Type) valid() bool { return t >= TypeRequest && t <= TypeStreamHeader }

// Flags are a frame's flag bits.
type Flags uint8

// The flags.
const (
	FlagNoReply    Flags = 1 << iota // the caller wants no answer
	FlagIdempotent                   // the call may safely run more than once
	FlagRetry                        // the call is a retry of an earlier attempt
	FlagRefused                      // on an error: refused without running a handler
	FlagKeep                         // on a request: its handler outlives the connection (the call may come again)
)

// Codec identifies the encoding of a frame's payload.
type Codec uint8

// The codecs.
const (
	CodecNone  Codec = 0
	CodecProto Codec = 1
	CodecJSON  Codec = 2
)

// Meta is one metadata pair: caller node id, trace context, auth, ...
type Meta struct{ Key, Value string }

// Frame is one decoded frame. See the package documentation for the layout
// and for which fields each type uses.
type Frame struct {
	Type     Type
	Flags    Flags
	Codec    Codec
	ID       uint64        // request id (0 for ping/pong/goaway is fine)
	Deadline time.Duration // remaining budget of the call; 0 = none
	Pattern  string        // request: the routing pattern (canonical string)
	Meta     []Meta        // caller node id, trace context, auth...
	Payload  []byte        // request/response body; for TypeError an encoded error
	// Body, when set, is the payload instead of Payload, encoded by
	// [AppendFrame] into the frame's own buffer. Decoding never sets it.
	Body Body
}

// deadlineMicros converts a deadline to its wire value: whole microseconds,
// with any non-zero deadline at least one so that it never reads as "none".
func deadlineMicros(d time.Duration) uint64 {
	switch {
	case d == 0:
		return 0
	case d < time.Microsecond:
		return 1
	}
	return uint64(d / time.Microsecond)
}

// maxDeadlineMicros is the largest deadline a time.Duration can hold.
const maxDeadlineMicros = math.MaxInt64 / int64(time.Microsecond)

// bodySize returns the size of f's body, the value of its length field.
func (f *Frame) bodySize() int {
	n := MinFrameSize - 3 +
		uvarintLen(deadlineMicros(f.Deadline)) +
		uvarintLen(uint64(len(f.Pattern))) + len(f.Pattern) +
		uvarintLen(uint64(len(f.Meta))) +
		f.payloadLen()
	for _, m := range f.Meta {
		n += uvarintLen(uint64(len(m.Key))) + len(m.Key) +
			uvarintLen(uint64(len(m.Value))) + len(m.Value)
	}
	return n
}

// Size returns the number of bytes [AppendFrame] appends for f: the length
// field plus the body. A writer compares Size()-4 with the peer's maximum
// frame size before sending.
func (f *Frame) Size() int { return 4 + f.bodySize() }

// AppendFrame appends f, length field first, to dst and returns the
// extended slice. It does not allocate when dst has room for f.Size()
// more bytes. A frame whose body is larger than [MaxFrameSize] cannot be
// represented; AppendFrame then returns dst unchanged (callers check
// [Frame.Size] against their limit first).
func AppendFrame(dst []byte, f *Frame) []byte {
	n := f.bodySize()
	if uint64(n) > MaxFrameSize {
		return dst
	}
	dst = slices.Grow(dst, 4+n)
	dst = binary.BigEndian.AppendUint32(dst, uint32(n))
	dst = append(dst, byte(f.Type), byte(f.Flags), byte(f.Codec))
	dst = binary.BigEndian.AppendUint64(dst, f.ID)
	dst = binary.AppendUvarint(dst, deadlineMicros(f.Deadline))
	dst = binary.AppendUvarint(dst, uint64(len(f.Pattern)))
	dst = append(dst, f.Pattern...)
	dst = binary.AppendUvarint(dst, uint64(len(f.Meta)))
	for _, m := range f.Meta {
		dst = binary.AppendUvarint(dst, uint64(len(m.Key)))
		dst = append(dst, m.Key...)
		dst = binary.AppendUvarint(dst, uint64(len(m.Value)))
		dst = append(dst, m.Value...)
	}
	if f.Body != nil {
		return f.Body.AppendTo(dst)
	}
	return append(dst, f.Payload...)
}

// SetFrameID overwrites the id of the encoded frame at the start of b (as
// written by [AppendFrame]). It lets a writer encode a frame first and
// number it later, at the moment it takes its place in the stream.
func SetFrameID(b []byte, id uint64) {
	binary.BigEndian.PutUint64(b[7:HeaderSize], id)
}

// BufferedReader is what [ReadFrame] reads frames from: a buffered
// reader, such as a *bufio.Reader.
type BufferedReader interface {
	io.Reader
	// Peek returns the next n bytes without consuming them; fewer, with
	// an error, when the stream ends first.
	Peek(n int) ([]byte, error)
	// Discard skips the next n bytes.
	Discard(n int) (int, error)
}

// ReadFrame reads one frame from r into f. It reads the length field,
// checks it against max (<= 0 means [DefaultMaxFrameSize]) before
// allocating, reads the body into buf (growing it when it is too small) and
// decodes it with [DecodeFrame]. It returns the buffer holding the body,
// which the caller may pass back as buf for the next read; f's Pattern,
// Meta and Payload alias it, so the caller copies what it keeps first, or
// passes a nil buf to get a buffer of its own for every frame.
//
// At a clean end of stream before a frame ReadFrame returns io.EOF; within
// a frame it returns io.ErrUnexpectedEOF.
func ReadFrame(r BufferedReader, max int, f *Frame, buf []byte) ([]byte, error) {
	if max <= 0 {
		max = DefaultMaxFrameSize
	}
	p, err := r.Peek(4)
	if err != nil {
		if err == io.EOF && len(p) > 0 {
			err = io.ErrUnexpectedEOF
		}
		return buf, err
	}
	n := uint64(binary.BigEndian.Uint32(p))
	if _, err := r.Discard(4); err != nil {
		return buf, err
	}
	if n > uint64(max) {
		return buf, ErrFrameTooLarge
	}
	if n < MinFrameSize {
		return buf, errShortBody
	}
	if uint64(cap(buf)) < n {
		buf = makeBody(int(n))
	}
	buf = buf[:n]
	if _, err := io.ReadFull(r, buf); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return buf[:0], err // what was not read is not shown (see makeBody)
	}
	return buf, DecodeFrame(buf, f)
}

// DecodeFrame decodes a frame body (a frame without its length field) into
// f, reusing f.Meta's backing array when it is large enough. It is strict:
// an unknown type, a truncated or padded varint, a section longer than
// what remains or a meta count larger than the remaining bytes can hold is
// an error wrapping [ErrMalformed], and f's contents are then unspecified.
// f's strings and Payload alias body.
func DecodeFrame(body []byte, f *Frame) error {
	if len(body) < MinFrameSize {
		return errShortBody
	}
	t := Type(body[0])
	if !t.valid() {
		return errUnknownType
	}
	f.Type, f.Flags, f.Codec = t, Flags(body[1]), Codec(body[2])
	f.ID = binary.BigEndian.Uint64(body[3:11])
	b := body[11:]

	d, n := uvarint(b)
	if n <= 0 {
		return errDeadline
	}
	if d > uint64(maxDeadlineMicros) {
		return errDeadlineRange
	}
	f.Deadline = time.Duration(d) * time.Microsecond
	b = b[n:]

	l, n := uvarint(b)
	if n <= 0 {
		return errPatternLen
	}
	b = b[n:]
	if l > uint64(len(b)) {
		return errPatternTrunc
	}
	f.Pattern = aliasString(b[:l])
	b = b[l:]

	c, n := uvarint(b)
	if n <= 0 {
		return errMetaCount
	}
	b = b[n:]
	if c > uint64(len(b)/2) { // every pair takes at least two bytes
		return errMetaCountRange
	}
	if c > MaxMeta {
		return errMetaCountLimit
	}
	meta := f.Meta[:0]
	if c > 0 && uint64(cap(meta)) < c {
		meta = make([]Meta, 0, c)
	}
	for range c {
		var m Meta
		var ok bool
		if m.Key, b, ok = readString(b); !ok {
			return errMetaLen
		}
		if m.Value, b, ok = readString(b); !ok {
			return errMetaLen
		}
		meta = append(meta, m)
	}
	f.Meta = meta
	f.Payload = b
	return nil
}

// readString reads a uvarint-length-prefixed string from the front of b.
func readString(b []byte) (s string, rest []byte, ok bool) {
	l, n := uvarint(b)
	if n <= 0 || l > uint64(len(b)-n) {
		return "", b, false
	}
	b = b[n:]
	return aliasString(b[:l]), b[l:], true
}
