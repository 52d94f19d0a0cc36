package wire

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the seed corpora in testdata/fuzz")

// corpora are the seed corpora in testdata/fuzz, by fuzz target.
var corpora = map[string]func() map[string][]byte{
	"FuzzDecodeFrame":   seedBodies,
	"FuzzReadHandshake": handshakeSeeds,
	"FuzzDecodeCredit":  creditSeeds,
}

// seedBodies are the frame bodies of the seed corpus: every test frame
// (the big payload cut short) and a few broken ones.
func seedBodies() map[string][]byte {
	seeds := map[string][]byte{}
	for name, f := range testFrames() {
		if len(f.Payload) > 1024 {
			g := *f
			g.Payload = g.Payload[:1024]
			f = &g
		}
		seeds[name] = AppendFrame(nil, f)[4:]
	}
	seeds["broken short"] = body(0, 0)
	seeds["broken type"] = append([]byte{14}, body(0, 0, 0)[1:]...)
	seeds["broken padded varint"] = body(0x80, 0x00, 0, 0)
	seeds["broken meta count"] = body(0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f)
	seeds["broken pattern length"] = body(0, 9, 'a', 0)
	return seeds
}

func seedFile(b []byte) []byte {
	return fmt.Appendf(nil, "go test fuzz v1\n[]byte(%s)\n", strconv.Quote(string(b)))
}

func seedName(name string) string {
	return string(bytes.ReplaceAll([]byte(name), []byte(" "), []byte("_")))
}

// handshakeSeeds are the seed corpus of FuzzReadHandshake: handshakes
// right, wrong and short, some with a frame behind.
func handshakeSeeds() map[string][]byte {
	return map[string][]byte{
		"valid":                     []byte("WZRD\x01\x00\x00\x00"),
		"valid with reserved bytes": []byte("WZRD\x01\xff\xff\xff"),
		"valid with streams":        []byte("WZRD\x01\x01\x00\x00"),
		"valid then a frame":        append([]byte("WZRD\x01\x00\x00\x00"), AppendFrame(nil, &Frame{Type: TypePing, ID: 1})...),
		"version 2":                 []byte("WZRD\x02\x00\x00\x00"),
		"wrong magic":               []byte("WZRX\x01\x00\x00\x00"),
		"HTTP":                      []byte("GET / HTTP/1.1\r\n\r\n"),
		"TLS client hello":          []byte("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"),
		"short":                     []byte("WZRD\x01"),
	}
}

// TestFuzzSeeds checks that the seed corpora in testdata are what
// seedBodies and handshakeSeeds produce; run with -update to rewrite
// them.
func TestFuzzSeeds(t *testing.T) {
	for target, seedsOf := range corpora {
		t.Run(target, func(t *testing.T) { checkSeeds(t, filepath.Join("testdata/fuzz", target), seedsOf()) })
	}
}

func checkSeeds(t *testing.T, seedDir string, seeds map[string][]byte) {
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range seeds {
			if !yield(n) {
				return
			}
		}
	})
	if *update {
		if err := os.MkdirAll(seedDir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			if err := os.WriteFile(filepath.Join(seedDir, seedName(n)), seedFile(seeds[n]), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, n := range names {
		got, err := os.ReadFile(filepath.Join(seedDir, seedName(n)))
		if err != nil {
			t.Fatalf("%v (run go test -run TestFuzzSeeds -update)", err)
		}
		if diff := cmp.Diff(string(seedFile(seeds[n])), string(got)); diff != "" {
			t.Errorf("seed %s is stale (run with -update) (-want +got):\n%s", n, diff)
		}
	}
}

// FuzzDecodeFrame feeds arbitrary frame bodies to the decoder. It must
// never panic, and a body it accepts must re-encode to the same bytes
// (there is one encoding per frame) and decode again to the same frame,
// through ReadFrame too.
func FuzzDecodeFrame(f *testing.F) {
	f.Add(body(0, 0, 0))
	f.Fuzz(func(t *testing.T, b []byte) {
		var fr Frame
		if err := DecodeFrame(b, &fr); err != nil {
			return
		}
		enc := AppendFrame(nil, &fr)
		if enc[0] != byte(len(b)>>24) || enc[1] != byte(len(b)>>16) || enc[2] != byte(len(b)>>8) || enc[3] != byte(len(b)) {
			t.Fatalf("length field %x for a body of %d bytes", enc[:4], len(b))
		}
		if !bytes.Equal(enc[4:], b) {
			t.Fatalf("decode then encode changed the body:\n%x\n%x", b, enc[4:])
		}
		if fr.Size() != len(enc) {
			t.Fatalf("Size() = %d, encoded %d bytes", fr.Size(), len(enc))
		}
		var again Frame
		if err := DecodeFrame(enc[4:], &again); err != nil {
			t.Fatalf("re-decoding: %v", err)
		}
		if diff := cmp.Diff(&fr, &again, equateEmpty); diff != "" {
			t.Fatalf("decode→encode→decode changed the frame (-first +second):\n%s", diff)
		}
		var read Frame
		if _, err := ReadFrame(bufio.NewReader(bytes.NewReader(enc)), len(b), &read, nil); err != nil {
			t.Fatalf("ReadFrame: %v", err)
		}
		if diff := cmp.Diff(&fr, &read, equateEmpty); diff != "" {
			t.Fatalf("ReadFrame differs from DecodeFrame (-decode +read):\n%s", diff)
		}
		if fr.Type == TypeError {
			DecodeErrorDetails(fr.Payload) // must not panic either
		}
	})
}

// FuzzReadHandshake feeds arbitrary bytes to ReadHandshake. It must never
// panic, read no more than the handshake, and accept exactly the magic
// and version with any reserved bytes; anything else is ErrBadMagic, a
// *VersionError naming the version, or a short read.
func FuzzReadHandshake(f *testing.F) {
	f.Add([]byte("WZRD\x01\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bytes.NewReader(b)
		err := ReadHandshake(r)
		if read := len(b) - r.Len(); read > HandshakeSize {
			t.Fatalf("read %d bytes, more than the handshake", read)
		}
		var ve *VersionError
		switch {
		case len(b) < HandshakeSize:
			if err != io.EOF && err != io.ErrUnexpectedEOF {
				t.Fatalf("%d bytes: %v, want a short read", len(b), err)
			}
		case string(b[:4]) != Magic:
			if err != ErrBadMagic {
				t.Fatalf("magic %q: %v, want ErrBadMagic", b[:4], err)
			}
		case b[4] != Version:
			if !errors.As(err, &ve) || ve.Got != b[4] || ve.Want != Version {
				t.Fatalf("version %d: %v, want a *VersionError", b[4], err)
			}
		case err != nil:
			t.Fatalf("a valid handshake %q: %v", b[:HandshakeSize], err)
		}
		feat, ferr := ReadHandshakeFeatures(bytes.NewReader(b))
		if ferr != err && !errors.As(ferr, &ve) {
			t.Fatalf("ReadHandshakeFeatures = %v, ReadHandshake = %v", ferr, err)
		}
		if ferr == nil && feat != Features(b[5]) {
			t.Fatalf("features %#x, want byte 5 %#x", feat, b[5])
		}
	})
}

// creditSeeds are the seed corpus of FuzzDecodeCredit.
func creditSeeds() map[string][]byte {
	return map[string][]byte{
		"one":      AppendCredit(nil, 1),
		"window":   AppendCredit(nil, 256<<10),
		"max":      AppendCredit(nil, MaxCredit),
		"zero":     {0},
		"padded":   {0x80, 0x00},
		"trailing": {1, 0},
		"too big":  {0x80, 0x80, 0x80, 0x80, 0x10},
		"empty":    {},
	}
}

// FuzzDecodeCredit feeds arbitrary payloads to DecodeCredit: it must
// never panic, and a payload it accepts re-encodes to the same bytes.
func FuzzDecodeCredit(f *testing.F) {
	f.Add(AppendCredit(nil, 1))
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := DecodeCredit(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("%x: %v does not wrap ErrMalformed", b, err)
			}
			return
		}
		if n == 0 {
			t.Fatalf("%x: accepted a zero credit", b)
		}
		if enc := AppendCredit(nil, n); !bytes.Equal(enc, b) {
			t.Fatalf("decode then encode changed %x to %x", b, enc)
		}
	})
}
