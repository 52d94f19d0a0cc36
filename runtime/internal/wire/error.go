package wire

import (
	"errors"
	"strconv"
)

// ErrFrameTooLarge is returned by [ReadFrame] when a frame's length field
// is above the reader's maximum. Nothing has been allocated for the frame,
// and the stream cannot be resynchronised: the connection should be closed.
var ErrFrameTooLarge = errors.New("wizard: wire: frame too large")

// ErrBadMagic is returned by [ReadHandshake] when the peer's first bytes are
// not the wizard magic: the peer does not speak this protocol.
var ErrBadMagic = errors.New("wizard: wire: bad handshake magic")

// ErrMalformed is the error every malformed frame or error payload wraps;
// the wrapping error names the reason ("truncated pattern", ...).
var ErrMalformed = errors.New("wizard: wire: malformed frame")

// VersionError is returned by [ReadHandshake] when the peer speaks another
// version of the wire protocol.
type VersionError struct {
	Got  uint8 // the peer's version
	Want uint8 // this side's version, [Version]
}

func (e *VersionError) Error() string {
	return "wizard: wire: peer speaks wire version " + strconv.Itoa(int(e.Got)) +
		", this side speaks version " + strconv.Itoa(int(e.Want))
}

// malformed is a reason a frame is malformed. Its values are package
// variables, so that decoding a bad frame does not allocate.
type malformed struct{ reason string }

func (e *malformed) Error() string { return ErrMalformed.Error() + ": " + e.reason }
func (e *malformed) Unwrap() error { return ErrMalformed }

// The reasons.
var (
	errShortBody      = &malformed{"length below the minimum frame size"}
	errUnknownType    = &malformed{"unknown frame type"}
	errDeadline       = &malformed{"bad deadline varint"}
	errDeadlineRange  = &malformed{"deadline out of range"}
	errPatternLen     = &malformed{"bad pattern length"}
	errPatternTrunc   = &malformed{"truncated pattern"}
	errMetaCount      = &malformed{"bad meta count"}
	errMetaCountRange = &malformed{"meta count exceeds the frame"}
	errMetaCountLimit = &malformed{"more than " + strconv.Itoa(MaxMeta) + " meta pairs"}
	errMetaLen        = &malformed{"bad meta length"}
	errCode           = &malformed{"bad error code"}
	errCodeRange      = &malformed{"error code out of range"}
	errMessageLen     = &malformed{"bad error message length"}
	errMessageTrunc   = &malformed{"truncated error message"}
	errCredit         = &malformed{"bad credit varint"}
	errCreditTrailing = &malformed{"bytes after the credit"}
	errCreditRange    = &malformed{"credit out of range [1, 2^32-1]"}
)
