package mux

import (
	"errors"
	"fmt"
	"io"
	"strings"
)

// ErrNotSent is wrapped by every [Client.Call] error that guarantees the
// request never reached the server's handler: it was not written to the
// connection before the connection failed or was closed, or the server
// refused it with a goaway. Such a call is safe to retry anywhere.
var ErrNotSent = errors.New("wizard: mux: request not sent")

// ErrConnLost is wrapped by [Client.Call] errors for calls whose request
// was written (or may have been) before the connection failed: the handler
// may have run. Only idempotent calls are safe to retry.
var ErrConnLost = errors.New("wizard: mux: connection lost after the request was sent")

// ErrStalled is wrapped by [Client.Call] errors for idempotent calls
// ([wire.FlagIdempotent]) given up while their connection stays open:
// keep-alive found the peer silent under calls, but its host
// acknowledged what this side sent, so the connection is kept for the
// peer's process to catch up (see keepalive.go), and the calls that may
// run again go elsewhere rather than wait on it. The handler may have
// run, as with [ErrConnLost].
var ErrStalled = errors.New("wizard: mux: call given up on a stalled connection")

// errStalledPeer is the reason of an [ErrStalled] call.
var errStalledPeer = errors.New("wizard: mux: peer did not answer a ping in time, though its host acknowledged it")

// ErrGoingAway is the error of calls refused because the server is
// shutting down: a [*CallError] of kind [ErrNotSent].
var ErrGoingAway error = &CallError{Kind: ErrNotSent, Reason: errors.New("wizard: mux: server is going away")}

// CallError is the error of a call that failed because its connection
// ended or is going away: Kind is [ErrNotSent] or [ErrConnLost] (or
// [ErrStalled], for an idempotent call given up), Reason why. It
// matches both with errors.Is, and reads "wizard: mux: request not
// sent: connection closed".
type CallError struct {
	Kind   error
	Reason error
}

func (e *CallError) Error() string { return e.Kind.Error() + ": " + Detail(e.Reason) }

func (e *CallError) Unwrap() []error { return []error{e.Kind, e.Reason} }

// Detail is err's message without this package's "wizard: mux: " prefix,
// for a message that says already where it comes from.
func Detail(err error) string { return strings.TrimPrefix(err.Error(), prefix) }

// prefix starts the message of every error this package makes.
const prefix = "wizard: mux: "

// ErrClosed is the reason of a connection closed by [Client.Close].
var ErrClosed = errors.New("wizard: mux: connection closed")

// ErrKeepAliveTimeout is the reason of a connection whose peer did not
// answer a ping within the keep-alive timeout.
var ErrKeepAliveTimeout = errors.New("wizard: mux: peer did not answer a ping in time")

// ErrProtocol is wrapped by the reason of a connection closed because the
// peer broke the protocol (a frame of the wrong type for its side, a
// duplicate request id).
var ErrProtocol = errors.New("wizard: mux: protocol violation")

// errPeerClosed is the reason of a connection the peer closed between
// frames.
var errPeerClosed = fmt.Errorf("wizard: mux: peer closed the connection: %w", io.EOF)

// errShutdown is the reason of a connection the server closed after a
// graceful shutdown; Serve returns nil for it.
var errShutdown = errors.New("wizard: mux: server shut down")

// errDrainTimeout is the reason of a connection whose handlers outlived
// the drain timeout.
var errDrainTimeout = errors.New("wizard: mux: in-flight handlers outlived the drain timeout")

// errHandshakeTimeout is the reason of a handshake that did not complete
// within the handshake timeout.
var errHandshakeTimeout = errors.New("wizard: mux: handshake timed out")

func protocolError(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrProtocol}, args...)...)
}
