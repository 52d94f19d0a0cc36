package harness

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestPayloadSmoke echoes two payload sizes through every contender,
// briefly, in separate server processes, and checks the report: a cell
// per contender and size, no failed call, bytes/s that follow from req/s,
// the target rows and a bar per cell in the chart.
func TestPayloadSmoke(t *testing.T) {
	sizes := []int{16, 64 << 10}
	cfg := PayloadConfig{Sizes: sizes, Callers: 4, Runs: 1, Warmup: 30 * time.Millisecond, Duration: 100 * time.Millisecond, MaxCalls: 200_000, Command: "go test"}
	if testing.Verbose() {
		cfg.Log = os.Stderr
	}
	rep, err := RunPayload(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(rep.Cells), len(PayloadContenders())*len(sizes); got != want {
		t.Fatalf("%d cells, want %d", got, want)
	}
	for _, size := range sizes {
		for _, c := range PayloadContenders() {
			cell, ok := rep.cell(c.Name, size)
			if !ok {
				t.Errorf("no cell for %s at %s", c.Title, Size(size))
				continue
			}
			checkCell(t, cell.Cell, 0)
			if cell.BytesPerSec != cell.PerSec*float64(size) {
				t.Errorf("%s, %s: %.0f bytes/s for %.0f req/s", c.Title, Size(size), cell.BytesPerSec, cell.PerSec)
			}
			if cell.CPU.Server < 0 || cell.CPU.Client <= 0 {
				t.Errorf("%s, %s: CPU per call %+v", c.Title, Size(size), cell.CPU)
			}
		}
	}
	var md bytes.Buffer
	if err := rep.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| 64 KiB | wizard TCP | ", "| 16 B | raw TCP floor | ", "| target (4 callers) | measured | met |",
		"| wizard TCP, 64 KiB payload: bytes/s ≥ 0.85x the floor's | ", "| wizard TCP, 64 KiB payload: bytes/s ≥ 2x gRPC-go's | ",
		"| wizard TCP, 64 KiB payload: bytes/s ≥ 1.5x pooled HTTP/1.1's | "} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("the payload section has no %q:\n%s", want, md.String())
		}
	}
	var svg bytes.Buffer
	if err := rep.WriteSVG(&svg); err != nil {
		t.Fatal(err)
	}
	checkSVG(t, svg.Bytes(), len(PayloadContenders())*len(sizes))
}

// TestConnsSmoke opens a few wizard clients, each with its own connection,
// to one server process and checks the report: the server's RSS read at
// every step, both loads measured without a failed call, the target rows.
func TestConnsSmoke(t *testing.T) {
	cfg := ConnsConfig{Conns: 12, Runs: 1, Warmup: 30 * time.Millisecond, Duration: 100 * time.Millisecond, MaxCalls: 200_000,
		Settle: 20 * time.Millisecond, Command: "go test"}
	if testing.Verbose() {
		cfg.Log = os.Stderr
	}
	rep, err := RunConns(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	row, ok := rep.row("wizard-tcp")
	if !ok || len(rep.Rows) != 1 {
		t.Fatalf("rows %+v: want one, of wizard TCP", rep.Rows)
	}
	for what, rss := range map[string]int64{"one": row.RSSOne, "idle": row.RSSIdle, "busy": row.RSSBusy, "shared": row.RSSShared, "after": row.RSSAfter} {
		if rss <= 0 {
			t.Errorf("server RSS %s: %d bytes", what, rss)
		}
	}
	checkCell(t, row.Spread, 0)
	checkCell(t, row.Shared, 0)
	// Every client connection costs the server at least its reader.
	if g, _, _ := row.perIdleConn(); row.MemOne.Goroutines == 0 || g < 1 {
		t.Errorf("server goroutines %d with one connection, %d with %d: want at least one more per connection",
			row.MemOne.Goroutines, row.MemIdle.Goroutines, row.Conns)
	}
	var md bytes.Buffer
	if err := rep.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| wizard TCP | 12 connections, 1 caller each | ", "| wizard TCP | 1 connection, 12 callers | ",
		"| wizard TCP: server RSS per idle connection ≤ 32 KiB | ", "| wizard TCP: req/s over 12 connections ≥ 0.8x one connection with 12 callers | "} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("the connections section has no %q:\n%s", want, md.String())
		}
	}
}

// TestConnsConfig checks that RunConns names what is wrong with its
// configuration before it starts anything.
func TestConnsConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  ConnsConfig
		want string
	}{
		{"one connection", ConnsConfig{Conns: 1}, "1 connections, want at least 2"},
		{"unknown contender", ConnsConfig{Conns: 2, Contenders: []string{"nope"}}, `unknown contender "nope"`},
		{"beyond the fd limit", ConnsConfig{Conns: 1 << 30}, "file descriptors"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := RunConns(t.Context(), tt.cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("RunConns: %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want int
		ok   bool
	}{
		{"16", 16, true}, {"16B", 16, true}, {" 1K", 1 << 10, true}, {"64KiB", 64 << 10, true}, {"1M", 1 << 20, true}, {"1 MiB", 1 << 20, true},
		{"", 0, false}, {"0", 0, false}, {"-1", 0, false}, {"1G", 0, false}, {"1.5K", 0, false}, {"65M", 0, false}, {"K", 0, false},
	}
	for _, tt := range tests {
		got, err := ParseSize(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d, ok %v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

func TestSize(t *testing.T) {
	for n, want := range map[int]string{16: "16 B", 1023: "1023 B", 1 << 10: "1 KiB", 1536: "1.5 KiB", 64 << 10: "64 KiB", 1 << 20: "1 MiB", 3 << 19: "1.5 MiB"} {
		if got := Size(n); got != want {
			t.Errorf("Size(%d) = %q, want %q", n, got, want)
		}
	}
}

// FuzzParseSize checks that ParseSize never panics and that what it
// accepts is in range and formats back to the same size.
func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"16", "1K", "64KiB", "1 MiB", "", "-3", "99999999999999999999M"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseSize(s)
		if err != nil {
			return
		}
		if n <= 0 || n > floorEchoMax {
			t.Fatalf("ParseSize(%q) = %d: out of range", s, n)
		}
		if !strings.Contains(Size(n), ".") {
			if m, err := ParseSize(strings.ReplaceAll(Size(n), " ", "")); err != nil || m != n {
				t.Fatalf("ParseSize(Size(%d) = %q) = %d, %v", n, Size(n), m, err)
			}
		}
	})
}

func TestParseRSS(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"Name:\tx\nVmRSS:\t   12345 kB\nThreads: 4\n", 12345 << 10, true},
		{"VmRSS: 0 kB", 0, true},
		{"Name: x\n", 0, false},
		{"VmRSS: 12 MB\n", 0, false},
		{"VmRSS: -1 kB\n", 0, false},
		{"VmRSS:\n", 0, false},
		{"VmRSS: 9223372036854775807 kB\n", 0, false},
	}
	for _, tt := range tests {
		got, err := parseRSS([]byte(tt.in))
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("parseRSS(%q) = %d, %v; want %d, ok %v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

// FuzzParseRSS checks that parseRSS never panics nor returns a negative
// size.
func FuzzParseRSS(f *testing.F) {
	f.Add([]byte("VmRSS:\t 100 kB\n"))
	f.Add([]byte("VmRSS: 9223372036854775807 kB\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if n, err := parseRSS(b); err == nil && n < 0 {
			t.Fatalf("parseRSS(%q) = %d", b, n)
		}
	})
}

// FuzzReadEchoHeader checks that the floor's echo header decoder never
// panics and bounds the length it accepts.
func FuzzReadEchoHeader(f *testing.F) {
	var h [floorEchoHeader]byte
	putEchoHeader(&h, 7, 16)
	f.Add(h[:])
	f.Add([]byte{0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		var h [floorEchoHeader]byte
		id, n, err := readEchoHeader(bufioReader(b), &h)
		if err == nil && (n < 0 || n > floorEchoMax) {
			t.Fatalf("header %x: id %d, length %d", b, id, n)
		}
	})
}

// fakeEcho answers with what answer makes of the payload.
type fakeEcho struct{ answer func([]byte) []byte }

func (f fakeEcho) Echo(_ context.Context, p []byte) ([]byte, error) { return f.answer(p), nil }
func (fakeEcho) Close() error                                       { return nil }

// TestEchoCallerChecks checks that an echo that loses bytes, or answers
// another call's payload, is an error, and a faithful one is not.
func TestEchoCallerChecks(t *testing.T) {
	var last []byte
	tests := []struct {
		name   string
		answer func([]byte) []byte
		ok     bool
	}{
		{"faithful", bytes.Clone, true},
		{"short", func(p []byte) []byte { return bytes.Clone(p[:len(p)-1]) }, false},
		{"stale", func(p []byte) []byte { r := last; last = bytes.Clone(p); return r }, false},
		{"tail changed", func(p []byte) []byte { r := bytes.Clone(p); r[len(r)-1]++; return r }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ec, err := newEchoCaller(fakeEcho{tt.answer}, 32, 2)
			if err != nil {
				t.Fatal(err)
			}
			last = nil
			for i := range 3 {
				r, err := ec.Call(t.Context(), 1, float64(i))
				if tt.ok && (err != nil || r != 1+float64(i)) {
					t.Fatalf("call %d: %v, %v", i, r, err)
				}
				if !tt.ok && i > 0 && !errors.Is(err, errEchoMismatch) {
					t.Fatalf("call %d: %v, want %v", i, err, errEchoMismatch)
				}
			}
		})
	}
	if _, err := newEchoCaller(fakeEcho{bytes.Clone}, 15, 1); err == nil {
		t.Error("newEchoCaller accepted a 15-byte payload")
	}
}

// TestSpreadClient checks that caller i of drive always uses connection
// i. Each connection's first call waits until every connection has had
// one, so that every caller takes part however late it starts.
func TestSpreadClient(t *testing.T) {
	const n = 3
	var got [n][]float64
	arrived := make(chan struct{}, n)
	all := make(chan struct{})
	var cs spreadClient
	for i := range got {
		cs = append(cs, &recorder{as: &got[i], arrived: arrived, all: all})
	}
	go func() {
		for range n {
			<-arrived
		}
		close(all)
	}()
	s, err := drive(t.Context(), cs, Load{Callers: n, Duration: time.Minute, MaxCalls: 30 * n})
	if err != nil || s.Errors > 0 {
		t.Fatalf("drive: %v, %+v", err, s)
	}
	for i, as := range got {
		if len(as) == 0 {
			t.Errorf("connection %d took no call", i)
		}
		for _, a := range as {
			if a != float64(i) {
				t.Fatalf("connection %d took a call of caller %v", i, a)
			}
		}
	}
	if _, err := cs.Call(t.Context(), n, 0); err == nil || !strings.Contains(err.Error(), strconv.Itoa(n)) {
		t.Errorf("caller %d of %d connections: %v", n, n, err)
	}
}

// recorder answers a + b and records a; drive's callers each own one.
// Its first call reports on arrived and waits for all to close.
type recorder struct {
	as      *[]float64
	arrived chan<- struct{}
	all     <-chan struct{}
	seen    bool
}

func (r *recorder) Call(ctx context.Context, a, b float64) (float64, error) {
	if !r.seen {
		r.seen = true
		r.arrived <- struct{}{}
		select {
		case <-r.all:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	*r.as = append(*r.as, a)
	return a + b, nil
}

func (*recorder) Close() error { return nil }

func bufioReader(b []byte) *bufio.Reader { return bufio.NewReader(bytes.NewReader(b)) }

func TestBytesRate(t *testing.T) {
	for v, want := range map[float64]string{999: "999 B/s", 2500: "2.5 kB/s", 266.3e6: "266.3 MB/s", 1.15e9: "1.15 GB/s"} {
		if got := bytesRate(v); got != want {
			t.Errorf("bytesRate(%v) = %q, want %q", v, got, want)
		}
	}
	for v, want := range map[float64]string{266.3e6: "266MB/s", 1e9: "1GB/s", 1.15e9: "1.15GB/s", 500: "500B/s"} {
		if got := shortBytes(v); got != want {
			t.Errorf("shortBytes(%v) = %q, want %q", v, got, want)
		}
	}
}
