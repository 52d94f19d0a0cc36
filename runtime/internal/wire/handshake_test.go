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

func TestHandshakeFeatures(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want Features
	}{
		{"none", "WZRD\x01\x00\x00\x00", 0},
		{"streams", "WZRD\x01\x01\x00\x00", FeatureStreams},
		{"unknown bits kept", "WZRD\x01\xff\x00\x00", 0xff},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ReadHandshakeFeatures(bytes.NewReader([]byte(tt.in)))
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("features = %#x, want %#x", got, tt.want)
			}
			if err := ReadHandshake(bytes.NewReader([]byte(tt.in))); err != nil {
				t.Errorf("ReadHandshake = %v", err)
			}
		})
	}
	var b bytes.Buffer
	if err := WriteHandshakeFeatures(&b, FeatureStreams); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]byte("WZRD\x01\x01\x00\x00"), b.Bytes()); diff != "" {
		t.Errorf("handshake bytes (-want +got):\n%s", diff)
	}
	if !FeatureStreams.Has(FeatureStreams) || Features(0).Has(FeatureStreams) {
		t.Error("Has is wrong")
	}
}

func TestCredit(t *testing.T) {
	for _, n := range []uint32{1, 127, 128, 256 << 10, MaxCredit} {
		got, err := DecodeCredit(AppendCredit(nil, n))
		if err != nil || got != n {
			t.Errorf("DecodeCredit(AppendCredit(%d)) = %d, %v", n, got, err)
		}
	}
	for name, b := range map[string][]byte{
		"empty":    nil,
		"zero":     {0},
		"padded":   {0x80, 0x00},
		"trailing": {1, 0},
		"too big":  {0x80, 0x80, 0x80, 0x80, 0x10},
	} {
		if _, err := DecodeCredit(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: DecodeCredit(%x) = %v, want ErrMalformed", name, b, err)
		}
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
