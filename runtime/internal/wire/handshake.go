package wire

import "io"

// Magic opens every wizard connection.
const Magic = "WZRD"

// Version is the wire protocol version this package speaks.
const Version = 1

// HandshakeSize is the size of the handshake each side writes.
const HandshakeSize = 8

// Features is the feature bit set a side announces in its handshake (byte
// 5). Bits a reader does not know are ignored: a version 1 peer that
// predates a feature writes it as zero and ignores it when it reads.
type Features uint8

// The features.
const (
	// FeatureStreams: the side speaks the stream frames (types 8 to 13).
	// A side sends no stream frame to a peer that did not announce it.
	FeatureStreams Features = 1 << iota
)

// Has reports whether every feature of g is in f.
func (f Features) Has(g Features) bool { return f&g == g }

// WriteHandshake writes a handshake announcing no feature: the magic,
// [Version] and three zero bytes, what a peer that predates the features
// writes.
func WriteHandshake(w io.Writer) error { return WriteHandshakeFeatures(w, 0) }

// WriteHandshakeFeatures writes this side's handshake: the magic,
// [Version], the features f and two reserved zero bytes.
func WriteHandshakeFeatures(w io.Writer, f Features) error {
	b := [HandshakeSize]byte{Magic[0], Magic[1], Magic[2], Magic[3], Version, byte(f)}
	_, err := w.Write(b[:])
	return err
}

// ReadHandshake reads the peer's handshake, ignoring its features. It
// returns [ErrBadMagic] when the peer does not speak wizard, a
// [*VersionError] when it speaks another version, or the reader's error
// (io.ErrUnexpectedEOF for a short handshake).
func ReadHandshake(r io.Reader) error {
	_, err := ReadHandshakeFeatures(r)
	return err
}

// ReadHandshakeFeatures is [ReadHandshake] returning the features the
// peer announced (every bit of byte 5, known or not; zero on an error).
func ReadHandshakeFeatures(r io.Reader) (Features, error) {
	var b [HandshakeSize]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return 0, err
	}
	if string(b[:4]) != Magic {
		return 0, ErrBadMagic
	}
	if b[4] != Version {
		return 0, &VersionError{Got: b[4], Want: Version}
	}
	return Features(b[5]), nil
}
