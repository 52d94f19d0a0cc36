package bridge

import (
	"errors"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/mux"
)

// connError is a transport's error for a call that failed with its
// connection, or a dial that failed. It reads "<where>: call not sent:
// <why>" ("wizard: tcp: dial 10.0.0.7:7070: call not sent: connect:
// connection refused") when the call surely did not reach the peer, and
// then matches [runtime.ErrNotSent]; else "<where>: connection lost after
// the call was sent: <why>". It also matches err, what it stands for.
type connError struct {
	where   string
	notSent bool
	stalled bool // an idempotent call given up on a stalled connection (mux.ErrStalled)
	why     string
	err     error
}

func (e *connError) Error() string {
	what := ": connection lost after the call was sent: "
	switch {
	case e.notSent:
		what = ": call not sent: "
	case e.stalled:
		what = ": call given up after it was sent, the connection kept: "
	}
	return e.where + what + e.why
}

// Stalled reports whether the call was given up on a connection that
// stays (mux.ErrStalled): its node may send it to the same peer again
// when no other can take it.
func (e *connError) Stalled() bool { return e.stalled }

// Timeout reports whether the connection was lost because its peer went
// silent (it did not answer a ping in time), not because it was closed.
func (e *connError) Timeout() bool { return errors.Is(e.err, mux.ErrKeepAliveTimeout) }

func (e *connError) Unwrap() []error {
	if e.notSent {
		return []error{runtime.ErrNotSent, e.err}
	}
	return []error{e.err}
}

// NotSent is the error of a dial that failed, or of anything else that
// failed before a call could be written: it matches [runtime.ErrNotSent]
// and err, and reads "<where>: call not sent: <err>", where is "wizard:
// <transport>: dial <addr>".
func NotSent(where string, err error) error {
	return &connError{where: where, notSent: true, why: mux.Detail(err), err: err}
}

// callError words the error of mux.Client.Do for the node: where is the
// connection's label, "wizard: <transport>: <addr>".
func callError(where string, err error) error {
	var ce *mux.CallError
	switch {
	case errors.As(err, &ce):
		return &connError{where: where, notSent: errors.Is(ce.Kind, mux.ErrNotSent), stalled: errors.Is(ce.Kind, mux.ErrStalled), why: mux.Detail(ce.Reason), err: err}
	case errors.Is(err, mux.ErrNotSent): // not expected: every mux error of that kind is a CallError
		return NotSent(where, err)
	}
	return err
}
