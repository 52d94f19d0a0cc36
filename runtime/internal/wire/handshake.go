package wire

import "io"

// Magic opens every wizard connection.
const Magic = "WZRD"

// Version is the wire protocol version this package speaks.
const Version = 1

// HandshakeSize is the size of the handshake each side writes.
const HandshakeSize = 8

// WriteHandshake writes this side's handshake: the magic, [Version] and
// three reserved zero bytes.
func WriteHandshake(w io.Writer) error {
	b := [HandshakeSize]byte{Magic[0], Magic[1], Magic[2], Magic[3], Version}
	_, err := w.Write(b[:])
	return err
}

// ReadHandshake reads the peer's handshake. It returns [ErrBadMagic] when
// the peer does not speak wizard, a [*VersionError] when it speaks another
// version, or the reader's error (io.ErrUnexpectedEOF for a short
// handshake).
func ReadHandshake(r io.Reader) error {
	var b [HandshakeSize]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return err
	}
	if string(b[:4]) != Magic {
		return ErrBadMagic
	}
	if b[4] != Version {
		return &VersionError{Got: b[4], Want: Version}
	}
	return nil
}
