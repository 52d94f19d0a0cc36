package wire

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestErrorPayloadRoundTrip(t *testing.T) {
	tests := []struct {
		name    string
		code    uint32
		msg     string
		details string
	}{
		{"ok empty", 0, "", ""},
		{"not found", 5, "wizard: no handler for role:math,cmd:nope", ""},
		{"max code", math.MaxUint32, "x", ""},
		{"long message", 13, strings.Repeat("m", 300), ""},
		{"details", 3, "bad a", "\x0a\x03abc"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := append(AppendError(nil, tt.code, tt.msg), tt.details...)
			code, msg, details, err := DecodeErrorDetails(b)
			if err != nil {
				t.Fatal(err)
			}
			got := []any{code, msg, string(details)}
			want := []any{tt.code, tt.msg, tt.details}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			code, msg, err = DecodeError(b)
			if err != nil || code != tt.code || msg != tt.msg {
				t.Errorf("DecodeError = %d, %q, %v", code, msg, err)
			}
		})
	}
}

func TestDecodeErrorErrors(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		want error
	}{
		{"empty", nil, errCode},
		{"padded code", []byte{0x85, 0x00, 0}, errCode},
		{"code beyond uint32", []byte{0x80, 0x80, 0x80, 0x80, 0x10, 0}, errCodeRange},
		{"missing message length", []byte{5}, errMessageLen},
		{"truncated message", []byte{5, 3, 'a', 'b'}, errMessageTrunc},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := DecodeError(tt.in)
			if err != tt.want || !errors.Is(err, ErrMalformed) {
				t.Errorf("DecodeError(%x) = %v, want %v wrapping ErrMalformed", tt.in, err, tt.want)
			}
		})
	}
}
