package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/pattern"
)

func TestCode_String(t *testing.T) {
	tests := []struct {
		code runtime.Code
		num  uint32
		want string
	}{
		{runtime.CodeOK, 0, "ok"},
		{runtime.CodeCanceled, 1, "canceled"},
		{runtime.CodeUnknown, 2, "unknown"},
		{runtime.CodeInvalidArgument, 3, "invalid_argument"},
		{runtime.CodeDeadlineExceeded, 4, "deadline_exceeded"},
		{runtime.CodeNotFound, 5, "not_found"},
		{runtime.CodeAlreadyExists, 6, "already_exists"},
		{runtime.CodePermissionDenied, 7, "permission_denied"},
		{runtime.CodeResourceExhausted, 8, "resource_exhausted"},
		{runtime.CodeFailedPrecondition, 9, "failed_precondition"},
		{runtime.CodeAborted, 10, "aborted"},
		{runtime.CodeOutOfRange, 11, "out_of_range"},
		{runtime.CodeUnimplemented, 12, "unimplemented"},
		{runtime.CodeInternal, 13, "internal"},
		{runtime.CodeUnavailable, 14, "unavailable"},
		{runtime.CodeDataLoss, 15, "data_loss"},
		{runtime.CodeUnauthenticated, 16, "unauthenticated"},
		{runtime.Code(17), 17, "code_17"},
		{runtime.Code(1 << 31), 1 << 31, "code_2147483648"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if uint32(tt.code) != tt.num {
				t.Errorf("%v = %d, want gRPC's %d", tt.code, uint32(tt.code), tt.num)
			}
			if got := tt.code.String(); got != tt.want {
				t.Errorf("Code(%d).String() = %q, want %q", tt.num, got, tt.want)
			}
		})
	}
}

func TestError_ErrorAndIs(t *testing.T) {
	details := []proto.Message{wrapperspb.String("d")}
	e := &runtime.Error{Code: runtime.CodeNotFound, Message: "wizard: no user 7", Details: details}
	if got := e.Error(); got != "wizard: no user 7" {
		t.Errorf("Error() = %q", got)
	}
	if got := runtime.NewError(runtime.CodeAborted, "").Error(); got != "wizard: aborted" {
		t.Errorf("Error() without a message = %q, want wizard: aborted", got)
	}
	if got := runtime.Errorf(runtime.CodeInternal, "wizard: %d %s", 1, "x"); got.Code != runtime.CodeInternal || got.Message != "wizard: 1 x" {
		t.Errorf("Errorf = %+v", got)
	}

	tests := []struct {
		name   string
		err    error
		target error
		want   bool
	}{
		{"code sentinel matches any message", e, runtime.ErrNotFound, true},
		{"other sentinel", e, runtime.ErrInternal, false},
		{"same code and message", e, runtime.NewError(runtime.CodeNotFound, "wizard: no user 7"), true},
		{"same code, other message", e, runtime.NewError(runtime.CodeNotFound, "wizard: no user 8"), false},
		{"other code, same message", e, runtime.NewError(runtime.CodeInternal, "wizard: no user 7"), false},
		{"wrapped", fmt.Errorf("lookup: %w", e), runtime.ErrNotFound, true},
		{"a sentinel is not a message error", runtime.ErrNotFound, e, false},
		{"not an *Error target", e, io.EOF, false},
		{"nil *Error target", e, (*runtime.Error)(nil), false},
		{"ErrResourceExhausted", runtime.NewError(runtime.CodeResourceExhausted, "busy"), runtime.ErrResourceExhausted, true},
		{"ErrUnimplemented", runtime.NewError(runtime.CodeUnimplemented, "x"), runtime.ErrUnimplemented, true},
		{"ErrUnavailable", runtime.NewError(runtime.CodeUnavailable, "x"), runtime.ErrUnavailable, true},
		{"ErrCanceled", runtime.NewError(runtime.CodeCanceled, "x"), runtime.ErrCanceled, true},
		{"ErrDeadlineExceeded", runtime.NewError(runtime.CodeDeadlineExceeded, "x"), runtime.ErrDeadlineExceeded, true},
		{"ErrInvalidArgument", runtime.NewError(runtime.CodeInvalidArgument, "x"), runtime.ErrInvalidArgument, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := errors.Is(tt.err, tt.target); got != tt.want {
				t.Errorf("errors.Is(%v, %v) = %v, want %v", tt.err, tt.target, got, tt.want)
			}
		})
	}

	// Sentinels carry their code and are distinct.
	sentinels := map[*runtime.Error]runtime.Code{
		runtime.ErrNotFound:          runtime.CodeNotFound,
		runtime.ErrResourceExhausted: runtime.CodeResourceExhausted,
		runtime.ErrUnimplemented:     runtime.CodeUnimplemented,
		runtime.ErrInvalidArgument:   runtime.CodeInvalidArgument,
		runtime.ErrInternal:          runtime.CodeInternal,
		runtime.ErrUnavailable:       runtime.CodeUnavailable,
		runtime.ErrDeadlineExceeded:  runtime.CodeDeadlineExceeded,
		runtime.ErrCanceled:          runtime.CodeCanceled,
	}
	for s, code := range sentinels {
		if s.Code != code || runtime.CodeOf(s) != code {
			t.Errorf("sentinel %v has code %v, want %v", s, s.Code, code)
		}
		if !strings.HasPrefix(s.Error(), "wizard: ") {
			t.Errorf("sentinel message %q lacks the wizard: prefix", s.Error())
		}
	}
	if !strings.HasPrefix(runtime.ErrClosed.Error(), "wizard: ") {
		t.Errorf("ErrClosed = %q", runtime.ErrClosed)
	}
}

func TestCodeOf(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want runtime.Code
	}{
		{"nil", nil, runtime.CodeOK},
		{"*Error", runtime.NewError(runtime.CodeAborted, "x"), runtime.CodeAborted},
		{"wrapped *Error", fmt.Errorf("a: %w", fmt.Errorf("b: %w", runtime.ErrUnimplemented)), runtime.CodeUnimplemented},
		{"joined *Error", errors.Join(io.EOF, runtime.ErrInternal), runtime.CodeInternal},
		{"context.Canceled", context.Canceled, runtime.CodeCanceled},
		{"context.DeadlineExceeded", context.DeadlineExceeded, runtime.CodeDeadlineExceeded},
		{"wrapped context error", fmt.Errorf("call: %w", context.DeadlineExceeded), runtime.CodeDeadlineExceeded},
		{"malformed pattern", parseError("a:1,,"), runtime.CodeInvalidArgument},
		{"wrapped malformed pattern", fmt.Errorf("route: %w", parseError("a")), runtime.CodeInvalidArgument},
		{"plain error", errors.New("boom"), runtime.CodeUnknown},
		{"io.EOF", io.EOF, runtime.CodeUnknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := runtime.CodeOf(tt.err); got != tt.want {
				t.Errorf("CodeOf(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

func parseError(s string) error {
	_, err := pattern.Parse(s)
	if err == nil {
		panic("ParsePattern(" + s + ") succeeded")
	}
	return err
}

// errWithIs is a handler's own error type with an Is method.
type errWithIs struct{ id int }

func (e errWithIs) Error() string        { return fmt.Sprintf("custom %d", e.id) }
func (e errWithIs) Is(target error) bool { _, ok := target.(errWithIs); return ok }

// TestHandlerErrors checks what a caller receives for each kind of error a
// handler returns.
func TestHandlerErrors(t *testing.T) {
	plain := errors.New("plain failure")
	coded := &runtime.Error{Code: runtime.CodePermissionDenied, Message: "wizard: denied", Details: []proto.Message{wrapperspb.String("why")}}
	tests := []struct {
		name    string
		err     error
		code    runtime.Code
		message string
		is      []error // errors.Is must find each
	}{
		{
			name:    "plain error becomes unknown with its message",
			err:     plain,
			code:    runtime.CodeUnknown,
			message: "plain failure",
			is:      []error{plain},
		},
		{
			name:    "wrapped plain error",
			err:     fmt.Errorf("db: %w", plain),
			code:    runtime.CodeUnknown,
			message: "db: plain failure",
			is:      []error{plain},
		},
		{
			name:    "custom error type keeps its Is",
			err:     errWithIs{3},
			code:    runtime.CodeUnknown,
			message: "custom 3",
			is:      []error{errWithIs{}},
		},
		{
			name:    "*Error reaches the caller as is",
			err:     coded,
			code:    runtime.CodePermissionDenied,
			message: "wizard: denied",
			is:      []error{coded},
		},
		{
			name:    "wrapped *Error keeps its code",
			err:     fmt.Errorf("auth: %w", coded),
			code:    runtime.CodePermissionDenied,
			message: "wizard: denied",
		},
		{
			name:    "a sentinel",
			err:     runtime.ErrUnimplemented,
			code:    runtime.CodeUnimplemented,
			message: "wizard: unimplemented",
			is:      []error{runtime.ErrUnimplemented},
		},
		{
			name:    "context.DeadlineExceeded",
			err:     context.DeadlineExceeded,
			code:    runtime.CodeDeadlineExceeded,
			message: "context deadline exceeded",
			is:      []error{context.DeadlineExceeded, runtime.ErrDeadlineExceeded},
		},
		{
			name:    "context.Canceled",
			err:     fmt.Errorf("stopped: %w", context.Canceled),
			code:    runtime.CodeCanceled,
			message: "stopped: context canceled",
			is:      []error{context.Canceled, runtime.ErrCanceled},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := newTestNode(t)
			mustAdd(t, n, "err:1", func(context.Context, runtime.Request) (any, error) { return "ignored", tt.err })
			res, err := n.Act(t.Context(), "err:1", nil)
			if res.Value() != nil {
				t.Errorf("Value() = %v alongside an error, want nil", res.Value())
			}
			wantCode(t, err, tt.code)
			if err.Error() != tt.message {
				t.Errorf("message = %q, want %q", err.Error(), tt.message)
			}
			for _, target := range tt.is {
				if !errors.Is(err, target) {
					t.Errorf("errors.Is(%v, %v) = false", err, target)
				}
			}
			// The same through the typed client.
			_, err = newClient[point, point](t, n, "err:1").Call(t.Context(), &point{})
			wantCode(t, err, tt.code)
		})
	}

	t.Run("details survive", func(t *testing.T) {
		n := newTestNode(t)
		mustAdd(t, n, "err:1", func(context.Context, runtime.Request) (any, error) { return nil, coded })
		_, err := n.ActE(t.Context(), "err:1", nil)
		var e *runtime.Error
		if !errors.As(err, &e) {
			t.Fatalf("err = %v", err)
		}
		if diff := cmp.Diff([]string{"why"}, detailStrings(e.Details)); diff != "" {
			t.Errorf("details mismatch (-want +got):\n%s", diff)
		}
	})
}

func detailStrings(ds []proto.Message) []string {
	var out []string
	for _, d := range ds {
		if s, ok := d.(*wrapperspb.StringValue); ok {
			out = append(out, s.Value)
		}
	}
	return out
}

// TestErrNoHandler: the not_found of a call no handler took matches
// ErrNoHandler; a handler's own not_found does not.
func TestErrNoHandler(t *testing.T) {
	n := newTestNode(t)
	mustAdd(t, n, "role:users,cmd:get", func(ctx context.Context, r runtime.Request) (any, error) {
		return nil, runtime.Errorf(runtime.CodeNotFound, "no such user")
	})
	_, nobody := n.Act(t.Context(), "role:nobody", nil)
	_, missing := n.Act(t.Context(), "role:users,cmd:get", nil)
	if !errors.Is(nobody, runtime.ErrNoHandler) || !errors.Is(nobody, runtime.ErrNotFound) {
		t.Errorf("no handler: %v does not match ErrNoHandler and ErrNotFound", nobody)
	}
	if errors.Is(missing, runtime.ErrNoHandler) || !errors.Is(missing, runtime.ErrNotFound) {
		t.Errorf("a handler's not_found: %v, want ErrNotFound only", missing)
	}
}
