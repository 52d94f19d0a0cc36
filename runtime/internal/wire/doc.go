// Package wire is the binary frame codec that wizard's stream transports
// (TCP, QUIC) share: a handshake per connection, then length-prefixed
// frames in both directions.
//
// # Handshake
//
// Each side writes 8 bytes once, before any frame; the client writes first
// and the server answers with its own:
//
//	offset  size  field
//	0       4     magic, the ASCII bytes "WZRD"
//	4       1     version, 1 ([Version])
//	5       1     features ([Features]), a bit set: bit 0 streams
//	              ([FeatureStreams]); other bits written as zero, ignored
//	6       2     reserved: written as zero, ignored by version 1 readers
//
// [ReadHandshake] returns [ErrBadMagic] when the first four bytes are not
// the magic and a [*VersionError] naming both versions when the version
// differs; [ReadHandshakeFeatures] returns the features besides. Byte 5
// was reserved, written as zero, before the streams feature: a peer that
// predates it announces no feature and ignores the bit, so the version
// stays 1 and unary calls work between old and new peers. A side sends no
// stream frame to a peer that did not announce [FeatureStreams].
//
// # Frames
//
// Integers in the fixed header are big endian. A frame is:
//
//	offset  size  field
//	0       4     length: the number of bytes after this field (the body),
//	              from 14 ([MinFrameSize]) to the reader's maximum
//	4       1     type ([Type]): 1 request, 2 response, 3 error, 4 cancel,
//	              5 ping, 6 pong, 7 goaway, 8 stream-open, 9 stream-data,
//	              10 stream-close, 11 stream-end, 12 stream-credit,
//	              13 stream-header; anything else is malformed
//	5       1     flags ([Flags]): bit 0 no-reply, bit 1 idempotent,
//	              bit 2 retry, bit 3 (on an error) refused without running
//	              a handler, bit 4 (on a request) keep the handler running
//	              if the connection is lost; other bits are carried as they
//	              are
//	6       1     codec ([Codec]): 0 none, 1 protobuf, 2 JSON; carried as is
//	7       8     id: the request id (uint64)
//	15      var   deadline: uvarint, the remaining budget of the call in
//	              microseconds; 0 means none
//	...     var   pattern: uvarint length n, then n bytes
//	...     var   meta count: uvarint c, then c pairs, each a uvarint
//	              length and the key's bytes, then a uvarint length and the
//	              value's bytes
//	...     rest  payload: every remaining byte of the body
//
// The first 15 bytes are [HeaderSize]; the smallest body (no deadline,
// pattern, meta or payload) is 14 bytes: 11 fixed plus three one-byte zero
// varints. Uvarints are those of encoding/binary, and must be in their
// shortest form: a decoder rejects padded varints, so that every frame has
// exactly one encoding and decode followed by encode gives back the same
// bytes.
//
// A deadline is encoded in whole microseconds, truncated; a positive
// deadline below one microsecond, or a negative one (a budget already
// spent), is sent as one microsecond so that it never reads as "none".
//
// Any frame type may carry any section; which sections mean something for
// which type is the business of the package using the codec
// (runtime/internal/mux): a request carries the pattern, meta and payload;
// a response its payload and meta; an error an encoded error (below);
// cancel, ping, pong and goaway only an id. The stream frames are below.
//
// # Streams
//
// A stream is a call that carries any number of messages each way. Its id
// comes from the same id space as requests (the client's, increasing along
// the connection), and every stream frame carries it:
//
//	type               way               sections that mean something
//	8  stream-open     client to server  flags, deadline, pattern, meta
//	                                     (the client's headers); no payload
//	9  stream-data     both ways         codec, payload: one message
//	10 stream-close    client to server  none: the client sends no more
//	                                     data (its half-close)
//	11 stream-end      server to client  payload: an encoded error (below;
//	                                     code 0 means OK), meta: trailers.
//	                                     Ends the stream
//	12 stream-credit   both ways         payload: a uvarint in [1, 2^32-1],
//	                                     bytes of data granted ([AppendCredit])
//	13 stream-header   server to client  meta: the server's headers, at most
//	                                     once, before any data or the end
//	4  cancel          client to server  with a stream's id: the client gave
//	                                     up on the stream
//
// The server ends a stream with stream-end rather than stream-close. Flow
// control (who may send how many bytes of data when) is the business of
// the package using the codec, but for its one constant: each side of a
// stream starts with [InitialWindow] (256 KiB) of credit for its data,
// which is not sent, and each data frame costs its payload's bytes plus
// [MessageCost] (64) of it. This package encodes the frames and the credit ([AppendCredit], [DecodeCredit]: one canonical uvarint,
// nothing after it, never zero, as HTTP/2 refuses a WINDOW_UPDATE of 0).
//
// # Errors
//
// The payload of a TypeError frame is:
//
//	code     uvarint, at most 2^32-1 (gRPC's code numbers)
//	message  uvarint length n, then n bytes
//	details  every remaining byte: opaque to this package (the runtime
//	         encodes its error details there); empty when there are none
//
// # Limits and aliasing
//
// [ReadFrame] checks the length field against the reader's maximum
// ([DefaultMaxFrameSize], 4 MiB, when none is given) before it allocates
// anything, so a peer cannot make it allocate more than the maximum.
// [DecodeFrame] checks every length against the bytes that remain (a meta
// count, for instance, against the two bytes each pair needs at least)
// before allocating, and refuses more than [MaxMeta] (256) meta pairs.
//
// Decoding does not copy: Pattern, the keys and values of Meta and Payload
// alias the frame body (strings through unsafe.String). The body must not
// be modified or reused while the decoded frame, or any string taken from
// it, is in use; a caller that reuses its read buffer must copy what it
// keeps.
//
// Decoding and encoding never panic. Decoding errors are [ErrMalformed]
// (wrapping the reason), [ErrFrameTooLarge], [ErrBadMagic], a
// [*VersionError], or the reader's own error (io.EOF before a frame,
// io.ErrUnexpectedEOF within one).
package wire
