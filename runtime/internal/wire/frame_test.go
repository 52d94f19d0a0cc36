package wire

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"math"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// testFrames are frames of every type, with every field set somewhere.
// Their deadlines are whole microseconds, so they round-trip exactly.
func testFrames() map[string]*Frame {
	return map[string]*Frame{
		"request full": {
			Type: TypeRequest, Flags: FlagIdempotent | FlagRetry, Codec: CodecProto,
			ID: 42, Deadline: 1500 * time.Millisecond, Pattern: "cmd:sum,role:math",
			Meta:    []Meta{{"caller", "node-1"}, {"traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}},
			Payload: []byte("\x08\x01\x10\x02"),
		},
		"request no reply":      {Type: TypeRequest, Flags: FlagNoReply, Codec: CodecJSON, ID: 1, Pattern: "role:log", Payload: []byte(`{"a":1}`)},
		"request empty":         {Type: TypeRequest},
		"request max id":        {Type: TypeRequest, ID: math.MaxUint64},
		"request long pattern":  {Type: TypeRequest, ID: 7, Pattern: strings.Repeat("k:v,", 100) + "z:1"},
		"request empty meta":    {Type: TypeRequest, ID: 8, Meta: []Meta{{"", ""}, {"k", ""}, {"", "v"}}},
		"request many meta":     {Type: TypeRequest, ID: 9, Meta: manyMeta(200)},
		"request big payload":   {Type: TypeRequest, ID: 10, Payload: bytes.Repeat([]byte{0xAB}, 70000)},
		"request max deadline":  {Type: TypeRequest, ID: 11, Deadline: time.Duration(maxDeadlineMicros) * time.Microsecond},
		"request min deadline":  {Type: TypeRequest, ID: 12, Deadline: time.Microsecond},
		"request unknown flags": {Type: TypeRequest, ID: 13, Flags: 0xF8, Codec: 200},
		"response":              {Type: TypeResponse, Codec: CodecProto, ID: 42, Payload: []byte("\x08\x03")},
		"response meta":         {Type: TypeResponse, ID: 43, Meta: []Meta{{"server-timing", "1ms"}}},
		"response empty":        {Type: TypeResponse, ID: 44},
		"error":                 {Type: TypeError, ID: 42, Payload: AppendError(nil, 5, "wizard: no handler for role:math,cmd:nope")},
		"cancel":                {Type: TypeCancel, ID: 42},
		"ping":                  {Type: TypePing, ID: 1},
		"pong":                  {Type: TypePong, ID: 1},
		"goaway":                {Type: TypeGoAway, ID: 99},
		"stream open": {
			Type: TypeStreamOpen, ID: 100, Deadline: 2 * time.Second, Pattern: "role:chat,cmd:join",
			Meta: []Meta{{"caller", "node-1"}},
		},
		"stream data":   {Type: TypeStreamData, Codec: CodecJSON, ID: 100, Payload: []byte(`{"msg":"hi"}`)},
		"stream close":  {Type: TypeStreamClose, ID: 100},
		"stream end":    {Type: TypeStreamEnd, ID: 100, Meta: []Meta{{"count", "3"}}, Payload: AppendError(nil, 0, "")},
		"stream credit": {Type: TypeStreamCredit, ID: 100, Payload: AppendCredit(nil, 128<<10)},
		"stream header": {Type: TypeStreamHeader, ID: 100, Meta: []Meta{{"server", "node-2"}}},
	}
}

func manyMeta(n int) []Meta {
	m := make([]Meta, n)
	for i := range m {
		m[i] = Meta{Key: "k" + strings.Repeat("x", i%7), Value: strings.Repeat("v", i)}
	}
	return m
}

var equateEmpty = cmpopts.EquateEmpty()

func TestFrameRoundTrip(t *testing.T) {
	for name, want := range testFrames() {
		t.Run(name, func(t *testing.T) {
			b := AppendFrame(nil, want)
			if len(b) != want.Size() {
				t.Fatalf("AppendFrame wrote %d bytes, Size() = %d", len(b), want.Size())
			}

			var got Frame
			if err := DecodeFrame(b[4:], &got); err != nil {
				t.Fatalf("DecodeFrame: %v", err)
			}
			if diff := cmp.Diff(want, &got, equateEmpty); diff != "" {
				t.Errorf("DecodeFrame (-want +got):\n%s", diff)
			}

			var read Frame
			br := bufio.NewReader(bytes.NewReader(b))
			if _, err := ReadFrame(br, 0, &read, nil); err != nil {
				t.Fatalf("ReadFrame: %v", err)
			}
			if diff := cmp.Diff(want, &read, equateEmpty); diff != "" {
				t.Errorf("ReadFrame (-want +got):\n%s", diff)
			}
			if _, err := ReadFrame(br, 0, &read, nil); err != io.EOF {
				t.Errorf("ReadFrame after the frame = %v, want io.EOF", err)
			}

			if again := AppendFrame(nil, &got); !bytes.Equal(again, b) {
				t.Errorf("re-encoding the decoded frame changed it:\n%x\n%x", b, again)
			}
		})
	}
}

func TestReadFrameStream(t *testing.T) {
	// Several frames back to back, read with one reused buffer and frame.
	frames := testFrames()
	var stream []byte
	var want []*Frame
	for _, f := range frames {
		stream = AppendFrame(stream, f)
		want = append(want, f)
	}
	br := bufio.NewReaderSize(bytes.NewReader(stream), 16) // frames straddle buffer refills
	var buf []byte
	var f Frame
	for i, w := range want {
		var err error
		if buf, err = ReadFrame(br, 0, &f, buf); err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if diff := cmp.Diff(w, &f, equateEmpty); diff != "" {
			t.Errorf("frame %d (-want +got):\n%s", i, diff)
		}
	}
	if _, err := ReadFrame(br, 0, &f, buf); err != io.EOF {
		t.Errorf("at the end: %v, want io.EOF", err)
	}
}

func TestDeadlineEncoding(t *testing.T) {
	tests := []struct {
		name string
		in   time.Duration
		want time.Duration
	}{
		{"none", 0, 0},
		{"whole micros", 2500 * time.Microsecond, 2500 * time.Microsecond},
		{"truncated", 2500*time.Microsecond + 999, 2500 * time.Microsecond},
		{"below a micro", 1, time.Microsecond},
		{"spent", -time.Second, time.Microsecond},
		{"max", math.MaxInt64, time.Duration(maxDeadlineMicros) * time.Microsecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := AppendFrame(nil, &Frame{Type: TypeRequest, Deadline: tt.in})
			var f Frame
			if err := DecodeFrame(b[4:], &f); err != nil {
				t.Fatal(err)
			}
			if f.Deadline != tt.want {
				t.Errorf("deadline %v decoded as %v, want %v", tt.in, f.Deadline, tt.want)
			}
		})
	}
}

func TestSetFrameID(t *testing.T) {
	f := &Frame{Type: TypeRequest, ID: 1, Pattern: "a:1", Payload: []byte("x")}
	b := AppendFrame(nil, f)
	SetFrameID(b, 0x0102030405060708)
	var got Frame
	if err := DecodeFrame(b[4:], &got); err != nil {
		t.Fatal(err)
	}
	want := *f
	want.ID = 0x0102030405060708
	if diff := cmp.Diff(&want, &got, equateEmpty); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// body returns the body of a hand-built frame: the fixed fields of a
// request with id 1, then rest.
func body(rest ...byte) []byte {
	return append([]byte{byte(TypeRequest), 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, rest...)
}

// TestDecodeFrameMetaLimit: MaxMeta meta pairs decode, one more is
// malformed.
func TestDecodeFrameMetaLimit(t *testing.T) {
	var f Frame
	at := append(body(0, 0, 0x80, 0x02), make([]byte, 2*MaxMeta)...)
	if err := DecodeFrame(at, &f); err != nil || len(f.Meta) != MaxMeta {
		t.Errorf("%d pairs: %v, %d decoded", MaxMeta, err, len(f.Meta))
	}
	over := append(body(0, 0, 0x81, 0x02), make([]byte, 2*(MaxMeta+1))...)
	if err := DecodeFrame(over, &f); err != errMetaCountLimit {
		t.Errorf("%d pairs: %v, want %v", MaxMeta+1, err, errMetaCountLimit)
	}
}

func TestDecodeFrameErrors(t *testing.T) {
	tests := []struct {
		name string
		body []byte
		want error
	}{
		{"empty", nil, errShortBody},
		{"short", body(0, 0), errShortBody},
		{"type zero", append([]byte{0}, body(0, 0, 0)[1:]...), errUnknownType},
		{"type beyond stream-header", append([]byte{14}, body(0, 0, 0)[1:]...), errUnknownType},
		{"type 255", append([]byte{255}, body(0, 0, 0)[1:]...), errUnknownType},
		{"padded deadline", body(0x80, 0x00, 0, 0), errDeadline},
		{"truncated deadline", body(0xff, 0xff, 0xff), errDeadline},
		{"overflowing deadline", body(0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0, 0), errDeadline},
		{"eleven byte deadline", body(0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0, 0), errDeadline},
		{"deadline beyond Duration", body(0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0, 0), errDeadlineRange},
		{"padded pattern length", body(0, 0x81, 0x00, 'a', 0), errPatternLen},
		{"pattern beyond body", body(0, 5, 'a', 'b', 0), errPatternTrunc},
		{"pattern length huge", body(0, 0xff, 0xff, 0xff, 0xff, 0x0f, 0), errPatternTrunc},
		{"missing meta count", body(0, 1, 'a'), errMetaCount},
		{"meta count beyond body", body(0, 0, 3, 0, 0, 0, 0), errMetaCountRange},
		{"meta count huge", body(0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f), errMetaCountRange},
		{"meta key beyond body", body(0, 0, 1, 5, 'k', 0), errMetaLen},
		{"meta value beyond body", body(0, 0, 1, 1, 'k', 4, 'v'), errMetaLen},
		{"meta value missing", body(0, 0, 1, 1, 'k'), errMetaLen},
		{"meta padded length", body(0, 0, 1, 0x80, 0x00, 0, 0), errMetaLen},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var f Frame
			err := DecodeFrame(tt.body, &f)
			if err != tt.want {
				t.Fatalf("DecodeFrame(%x) = %v, want %v", tt.body, err, tt.want)
			}
			if !errors.Is(err, ErrMalformed) {
				t.Errorf("%v does not wrap ErrMalformed", err)
			}
		})
	}
}

func TestDecodeFrameTruncated(t *testing.T) {
	for name, f := range testFrames() {
		t.Run(name, func(t *testing.T) {
			b := AppendFrame(nil, f)[4:]
			payloadAt := len(b) - len(f.Payload)
			var got Frame
			for i := range b {
				err := DecodeFrame(b[:i], &got)
				if i < payloadAt {
					// Cut inside the header sections: always an error.
					if !errors.Is(err, ErrMalformed) {
						t.Fatalf("body cut at %d of %d: err = %v, want ErrMalformed", i, len(b), err)
					}
					continue
				}
				// Cut inside the payload, which is the rest of the body:
				// a valid frame with a shorter payload.
				if err != nil {
					t.Fatalf("body cut at %d in the payload: %v", i, err)
				}
				if len(got.Payload) != i-payloadAt {
					t.Fatalf("body cut at %d: payload of %d bytes, want %d", i, len(got.Payload), i-payloadAt)
				}
			}
		})
	}
}

func TestReadFrameTruncated(t *testing.T) {
	// The length field promises the whole body: a stream that ends anywhere
	// before it is io.ErrUnexpectedEOF, and at offset 0 a clean io.EOF.
	for name, f := range testFrames() {
		t.Run(name, func(t *testing.T) {
			b := AppendFrame(nil, f)
			step := 1
			if len(b) > 4096 {
				step = 97 // the big payload: a sample of offsets is enough
			}
			var got Frame
			for i := 0; i < len(b); i += step {
				_, err := ReadFrame(bufio.NewReader(bytes.NewReader(b[:i])), 0, &got, nil)
				want := io.ErrUnexpectedEOF
				if i == 0 {
					want = io.EOF
				}
				if err != want {
					t.Fatalf("stream cut at %d of %d: err = %v, want %v", i, len(b), err, want)
				}
			}
		})
	}
}

func TestReadFrameLimits(t *testing.T) {
	frame := func(n uint32) []byte {
		b := []byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}
		return append(b, body(0, 0, 0)...)
	}
	tests := []struct {
		name   string
		stream []byte
		max    int
		want   error
	}{
		{"length 2^32-1", []byte{0xff, 0xff, 0xff, 0xff, 1, 2, 3}, 0, ErrFrameTooLarge},
		{"just above the default", frame(DefaultMaxFrameSize + 1), 0, ErrFrameTooLarge},
		{"just above a small max", frame(101), 100, ErrFrameTooLarge},
		{"at a small max", append(frame(100), make([]byte, 86)...), 100, nil},
		{"HTTP request", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), 0, ErrFrameTooLarge},
		{"TLS client hello", []byte{0x16, 0x03, 0x01, 0x02, 0x00, 0x01}, 0, ErrFrameTooLarge},
		{"zero length", frame(0), 0, errShortBody},
		{"below the minimum", frame(MinFrameSize - 1), 0, errShortBody},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var f Frame
			_, err := ReadFrame(bufio.NewReader(bytes.NewReader(tt.stream)), tt.max, &f, nil)
			if err != tt.want {
				t.Errorf("ReadFrame = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestReadFrameOversizedDoesNotAllocate(t *testing.T) {
	// A 4 GiB length field costs nothing: it is refused before allocating.
	huge := []byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}
	src := bytes.NewReader(huge)
	br := bufio.NewReader(src)
	var f Frame
	allocs := testing.AllocsPerRun(100, func() {
		src.Reset(huge)
		br.Reset(src)
		if _, err := ReadFrame(br, 0, &f, nil); err != ErrFrameTooLarge {
			t.Fatalf("ReadFrame = %v, want ErrFrameTooLarge", err)
		}
	})
	if allocs != 0 {
		t.Errorf("refusing an oversized frame allocated %v times, want 0", allocs)
	}

	// A meta count of 2^63 is refused before making the Meta slice.
	b := body(0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f)
	allocs = testing.AllocsPerRun(100, func() {
		if err := DecodeFrame(b, &f); err != errMetaCountRange {
			t.Fatalf("DecodeFrame = %v", err)
		}
	})
	if allocs != 0 {
		t.Errorf("refusing a huge meta count allocated %v times, want 0", allocs)
	}
}

func TestReadFrameGarbage(t *testing.T) {
	// Whatever the bytes, ReadFrame returns a frame or an error, never
	// panics, and never reads past the limit.
	seed := uint64(1)
	next := func() byte {
		seed ^= seed << 13
		seed ^= seed >> 7
		seed ^= seed << 17
		return byte(seed)
	}
	for i := range 2000 {
		n := 1 + i%64
		b := make([]byte, n)
		for j := range b {
			b[j] = next()
		}
		if i%2 == 0 { // half of them with a plausible length field
			b = append([]byte{0, 0, 0, byte(n)}, b...)
		}
		br := bufio.NewReader(bytes.NewReader(b))
		var f Frame
		var buf []byte
		for {
			var err error
			buf, err = ReadFrame(br, 1024, &f, buf)
			if err != nil {
				break
			}
		}
	}
}

func TestAllocations(t *testing.T) {
	f := testFrames()["request full"]
	dst := make([]byte, 0, 1024)
	if n := testing.AllocsPerRun(100, func() { dst = AppendFrame(dst[:0], f) }); n != 0 {
		t.Errorf("AppendFrame into a buffer with room: %v allocations, want 0", n)
	}
	if n := testing.AllocsPerRun(100, func() { _ = f.Size() }); n != 0 {
		t.Errorf("Size: %v allocations, want 0", n)
	}

	src := bytes.NewReader(dst)
	br := bufio.NewReader(src)
	var got Frame
	var buf []byte
	n := testing.AllocsPerRun(100, func() {
		src.Reset(dst)
		br.Reset(src)
		var err error
		if buf, err = ReadFrame(br, 0, &got, buf); err != nil {
			t.Fatal(err)
		}
	})
	if n != 0 {
		t.Errorf("ReadFrame with a reused buffer and frame: %v allocations, want 0", n)
	}
}

func TestTypeString(t *testing.T) {
	got := []string{TypeRequest.String(), TypeGoAway.String(), TypeStreamOpen.String(), TypeStreamHeader.String(), Type(0).String(), Type(14).String()}
	want := []string{"request", "goaway", "stream-open", "stream-header", "type(0)", "type(14)"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// cycle is an endless reader that repeats b.
type cycle struct {
	b   []byte
	off int
}

func (c *cycle) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		k := copy(p[n:], c.b[c.off:])
		n += k
		c.off = (c.off + k) % len(c.b)
	}
	return n, nil
}

func BenchmarkAppendFrame(b *testing.B) {
	f := testFrames()["request full"]
	dst := make([]byte, 0, 1024)
	b.ReportAllocs()
	b.SetBytes(int64(f.Size()))
	for b.Loop() {
		dst = AppendFrame(dst[:0], f)
	}
}

func BenchmarkReadFrame(b *testing.B) {
	f := testFrames()["request full"]
	br := bufio.NewReaderSize(&cycle{b: AppendFrame(nil, f)}, 32<<10)
	var got Frame
	var buf []byte
	b.ReportAllocs()
	b.SetBytes(int64(f.Size()))
	for b.Loop() {
		var err error
		if buf, err = ReadFrame(br, 0, &got, buf); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeFrame(b *testing.B) {
	f := testFrames()["request full"]
	body := AppendFrame(nil, f)[4:]
	var got Frame
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if err := DecodeFrame(body, &got); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReadFrameLarge reads 1 MiB frames into a buffer of their own
// each, as the mux's reader does.
func BenchmarkReadFrameLarge(b *testing.B) {
	f := &Frame{Type: TypeRequest, ID: 1, Pattern: "cmd:echo", Payload: bytes.Repeat([]byte{0x5A}, 1<<20)}
	br := bufio.NewReaderSize(&cycle{b: AppendFrame(nil, f)}, 32<<10)
	var got Frame
	b.ReportAllocs()
	b.SetBytes(int64(f.Size()))
	for b.Loop() {
		if _, err := ReadFrame(br, 8<<20, &got, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// TestReadFrameLargeBodies reads large frames, whose buffers are not
// zeroed, after garbage and truncated reads that leave stale bytes in
// freed memory: every body is exactly its frame's bytes.
func TestReadFrameLargeBodies(t *testing.T) {
	for _, size := range []int{noZeroMin - 100, noZeroMin, 64 << 10, 1 << 20} {
		t.Run(strconv.Itoa(size), func(t *testing.T) {
			for i := range 4 {
				junk := bytes.Repeat([]byte{0xEE}, size+64)
				want := &Frame{Type: TypeResponse, ID: uint64(i + 1), Payload: bytes.Repeat([]byte{byte(i)}, size)}
				enc := AppendFrame(nil, want)
				// A truncated copy first: what it did not read is not shown.
				var f Frame
				if b, err := ReadFrame(bufio.NewReader(bytes.NewReader(enc[:len(enc)/2])), 8<<20, &f, nil); err != io.ErrUnexpectedEOF || len(b) != 0 {
					t.Fatalf("truncated: %d bytes, %v; want none, io.ErrUnexpectedEOF", len(b), err)
				}
				runtime.KeepAlive(junk)
				junk = nil
				runtime.GC() // its memory may now back the next unzeroed body
				buf, err := ReadFrame(bufio.NewReader(bytes.NewReader(enc)), 8<<20, &f, nil)
				if err != nil {
					t.Fatal(err)
				}
				if len(buf) != len(enc)-4 || !bytes.Equal(buf, enc[4:]) {
					t.Fatalf("body of %d bytes differs from the frame's", len(buf))
				}
				if diff := cmp.Diff(want, &f, equateEmpty); diff != "" {
					t.Errorf("(-want +got):\n%s", diff)
				}
			}
		})
	}
}
