package runtime

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/wizardmesh/wizard/runtime/pattern"
	"google.golang.org/protobuf/proto"
)

// Code is an error code. The names and numbers are gRPC's.
type Code uint32

// The error codes, with gRPC's numbers.
const (
	CodeOK                 Code = 0
	CodeCanceled           Code = 1
	CodeUnknown            Code = 2
	CodeInvalidArgument    Code = 3
	CodeDeadlineExceeded   Code = 4
	CodeNotFound           Code = 5
	CodeAlreadyExists      Code = 6
	CodePermissionDenied   Code = 7
	CodeResourceExhausted  Code = 8
	CodeFailedPrecondition Code = 9
	CodeAborted            Code = 10
	CodeOutOfRange         Code = 11
	CodeUnimplemented      Code = 12
	CodeInternal           Code = 13
	CodeUnavailable        Code = 14
	CodeDataLoss           Code = 15
	CodeUnauthenticated    Code = 16
)

var codeNames = [...]string{
	"ok", "canceled", "unknown", "invalid_argument", "deadline_exceeded",
	"not_found", "already_exists", "permission_denied", "resource_exhausted",
	"failed_precondition", "aborted", "out_of_range", "unimplemented",
	"internal", "unavailable", "data_loss", "unauthenticated",
}

// String returns the code's name in snake case, as connect and the gateway
// print it ("not_found", "resource_exhausted").
func (c Code) String() string {
	if int(c) < len(codeNames) {
		return codeNames[c]
	}
	return "code_" + strconv.FormatUint(uint64(c), 10)
}

// Error is the one error type that crosses the wire: a code, a message and
// optional details. Handlers may return it to choose the code their callers
// see; any other error reaches callers as [CodeUnknown] with its message.
type Error struct {
	Code    Code
	Message string
	Details []proto.Message
	cause   error
}

// NewError returns an error with the given code and message.
func NewError(c Code, msg string) *Error { return &Error{Code: c, Message: msg} }

// Errorf returns an error with the given code and a formatted message.
func Errorf(c Code, format string, args ...any) *Error {
	return &Error{Code: c, Message: fmt.Sprintf(format, args...)}
}

func (e *Error) Error() string {
	if e.Message == "" {
		return "wizard: " + e.Code.String()
	}
	return e.Message
}

// Unwrap returns the local cause, if any. Causes do not cross the wire.
func (e *Error) Unwrap() error { return e.cause }

// Is reports whether target is an *Error with the same code and either no
// message (the code sentinels such as [ErrNotFound]) or the same message.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	if !ok || t == nil {
		return false
	}
	return t.Code == e.Code && (t.Message == "" || t.Message == e.Message)
}

// CodeOf returns err's code: CodeOK for nil, the code of an *Error in err's
// chain, CodeInvalidArgument for a [*pattern.ParseError], CodeCanceled /
// CodeDeadlineExceeded for context errors, else CodeUnknown.
func CodeOf(err error) Code {
	if err == nil {
		return CodeOK
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	var pe *pattern.ParseError
	switch {
	case errors.As(err, &pe):
		return CodeInvalidArgument
	case errors.Is(err, context.Canceled):
		return CodeCanceled
	case errors.Is(err, context.DeadlineExceeded):
		return CodeDeadlineExceeded
	}
	return CodeUnknown
}

// ErrNoHandler matches (errors.Is) the not_found of a call no handler
// took: no pattern matched it, or the peers it went to had no handler for
// it any more. A handler's own not_found ("no such user") does not match
// it, so a gateway can tell a route nobody serves from a missing record.
var ErrNoHandler = errors.New("wizard: no handler serves the call")

// Code sentinels: errors.Is(err, ErrNotFound) is true for any *Error with
// that code.
var (
	ErrNotFound          = &Error{Code: CodeNotFound}
	ErrResourceExhausted = &Error{Code: CodeResourceExhausted}
	ErrUnimplemented     = &Error{Code: CodeUnimplemented}
	ErrInvalidArgument   = &Error{Code: CodeInvalidArgument}
	ErrInternal          = &Error{Code: CodeInternal}
	ErrUnavailable       = &Error{Code: CodeUnavailable}
	ErrDeadlineExceeded  = &Error{Code: CodeDeadlineExceeded}
	ErrCanceled          = &Error{Code: CodeCanceled}
)

// ErrAnswerDropped is the error of a call sent again (refed after its
// connection dropped) whose first copy ran and whose answer the serving
// node no longer kept: the de-duplication table dropped it for room
// before its time. The call did run, once; what it answered is lost. Its
// code is [CodeDataLoss], which the runtime gives no other error.
var ErrAnswerDropped = &Error{Code: CodeDataLoss, Message: "wizard: the call ran; its answer is no longer kept"}

// ErrClosed is the cause of the [CodeUnavailable] error returned by calls on
// a node that is closed or shutting down.
var ErrClosed = errors.New("wizard: node is closed")

// toError converts a handler's error into an *Error for the caller, keeping
// the original as the cause so errors.Is still finds it in-process.
func toError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Code: CodeOf(err), Message: err.Error(), cause: err}
}
