package wire

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestHandshake(t *testing.T) {
	var b bytes.Buffer
	if err := WriteHandshake(&b); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]byte("WZRD\x01\x00\x00\x00"), b.Bytes()); diff != "" {
		t.Errorf("handshake bytes (-want +got):\n%s", diff)
	}
	if err := ReadHandshake(&b); err != nil {
		t.Errorf("ReadHandshake(own handshake) = %v", err)
	}
}

func TestReadHandshakeErrors(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    error
		version *VersionError
	}{
		{"reserved bytes ignored", "WZRD\x01\xff\xff\xff", nil, nil},
		{"empty", "", io.EOF, nil},
		{"short", "WZRD\x01", io.ErrUnexpectedEOF, nil},
		{"wrong magic", "WZRX\x01\x00\x00\x00", ErrBadMagic, nil},
		{"HTTP", "GET / HTTP/1.1\r\n", ErrBadMagic, nil},
		{"lower case magic", "wzrd\x01\x00\x00\x00", ErrBadMagic, nil},
		{"version 2", "WZRD\x02\x00\x00\x00", nil, &VersionError{Got: 2, Want: 1}},
		{"version 0", "WZRD\x00\x00\x00\x00", nil, &VersionError{Got: 0, Want: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ReadHandshake(bytes.NewReader([]byte(tt.in)))
			if tt.version != nil {
				var ve *VersionError
				if !errors.As(err, &ve) {
					t.Fatalf("ReadHandshake = %v, want a *VersionError", err)
				}
				if diff := cmp.Diff(tt.version, ve); diff != "" {
					t.Errorf("(-want +got):\n%s", diff)
				}
				return
			}
			if err != tt.want {
				t.Errorf("ReadHandshake = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestVersionErrorMessage(t *testing.T) {
	got := (&VersionError{Got: 2, Want: 1}).Error()
	want := "wizard: wire: peer speaks wire version 2, this side speaks version 1"
	if got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}
