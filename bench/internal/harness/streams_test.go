package harness

import (
	"bytes"
	"math"
	"os"
	"strings"
	"testing"
	"time"
)

// TestStreamsSmoke runs every contender of the streams mode briefly, each
// server in its own process, at two numbers of streams and two message
// sizes, and a few idle streams, and checks the report: a cell per
// contender, count and size, none failed, bytes/s that follow from
// msgs/s, the idle rows, the target rows and a bar per cell in the chart.
func TestStreamsSmoke(t *testing.T) {
	cfg := StreamsConfig{Streams: []int{1, 4}, Sizes: []int{16, 64 << 10}, Runs: 1, Warmup: 30 * time.Millisecond, Duration: 100 * time.Millisecond,
		Idle: 20, Command: "go test"}
	if testing.Verbose() {
		cfg.Log = os.Stderr
	}
	rep, err := RunStreams(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(rep.Cells), len(streamers)*len(cfg.Streams)*len(cfg.Sizes); got != want {
		t.Fatalf("%d cells, want %d", got, want)
	}
	for _, c := range rep.Cells {
		if c.Errors > 0 {
			t.Errorf("%s, %d streams of %s: %d runs failed, first: %s", c.Contender, c.Streams, Size(c.Size), c.Errors, c.FirstErr)
		}
		if c.MsgsPerSec <= 0 || c.BytesPerSec != c.MsgsPerSec*float64(c.Size) || c.CPU.Client <= 0 {
			t.Errorf("%s, %d streams of %s: %.0f msgs/s, %.0f bytes/s, CPU/msg %+v", c.Contender, c.Streams, Size(c.Size), c.MsgsPerSec, c.BytesPerSec, c.CPU)
		}
	}
	idle := 0
	for _, s := range streamers {
		if !s.idle {
			continue
		}
		idle++
		row, ok := rep.idleRow(s.name)
		if !ok {
			t.Errorf("no idle row for %s", s.title)
			continue
		}
		// Every contender's server runs a handler per stream.
		if row.Server.Goroutines < 0.5 || math.IsNaN(row.Server.Total()) || math.IsNaN(row.Client.Total()) {
			t.Errorf("%s idle streams: %+v", s.title, row)
		}
	}
	if len(rep.Idle) != idle {
		t.Errorf("%d idle rows, want %d", len(rep.Idle), idle)
	}
	var md bytes.Buffer
	if err := rep.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| 4 | 64 KiB | raw TCP floor | ", "| 1 | 16 B | gRPC-go | ", "| 1 | 16 B | NATS core | ",
		"| wizard TCP, 4 stream(s) of 16 B: msgs/s ≥ 2x gRPC-go's | ", "| wizard TCP, 1 stream(s) of 64 KiB: bytes/s ≥ 0.8x the floor's | ",
		"| wizard TCP: an idle stream costs ≤ 2 KiB on the client | ", "## Idle streams"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("the streams section has no %q:\n%s", want, md.String())
		}
	}
	var svg bytes.Buffer
	if err := rep.WriteSVG(&svg); err != nil {
		t.Fatal(err)
	}
	checkSVG(t, svg.Bytes(), len(rep.Cells))
}

// TestStreamCounts checks the stamps: in order counts, a gap is an error
// unless the contender may lose messages, and then it counts as lost.
func TestStreamCounts(t *testing.T) {
	msg := func(seq uint64) []byte {
		p := make([]byte, 16)
		stampMessage(p, seq)
		return p
	}
	c := newStreamCounts(2, 16, false)
	for seq := range uint64(3) {
		if err := c.got(1, msg(seq)); err != nil {
			t.Fatalf("message %d: %v", seq, err)
		}
	}
	if n, lost := c.total(); n != 3 || lost != 0 {
		t.Errorf("total = %d, %d lost; want 3, 0", n, lost)
	}
	torn := msg(0)
	torn[15] ^= 1
	for name, err := range map[string]error{
		"a gap":             c.got(1, msg(5)),
		"a repeat":          c.got(0, msg(1)),
		"torn stamps":       c.got(0, torn),
		"the wrong size":    c.got(0, make([]byte, 17)),
		"an unknown stream": c.got(2, msg(0)),
	} {
		if err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	lossy := newStreamCounts(1, 16, true)
	for _, seq := range []uint64{0, 1, 4, 5} {
		if err := lossy.got(0, msg(seq)); err != nil {
			t.Fatalf("lossy, message %d: %v", seq, err)
		}
	}
	if n, lost := lossy.total(); n != 4 || lost != 2 {
		t.Errorf("lossy total = %d, %d lost; want 4, 2", n, lost)
	}
	if err := lossy.got(0, msg(3)); err == nil {
		t.Error("lossy: a message from the past: no error")
	}
}
