package gwbench

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"
)

// TestStreamsSmoke runs the server streams with a few clients, at a rate
// and as fast as flow control allows, against the real wizard-gateway
// binary and a streamer process: every message sent must reach its
// client, once, with a plausible latency, every stream must end with 200,
// and the report must hold the section.
func TestStreamsSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("builds wizard-gateway and starts the echo, streamer and gateway processes; not in -short")
	}
	const clients = 8
	cfg := Config{
		Streams: StreamsConfig{Clients: clients, Rates: []int{50, 0}, Duration: 500 * time.Millisecond},
		Command: "go test",
	}
	if testing.Verbose() {
		cfg.Log = os.Stderr
	}
	rep, err := Run(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Streams) != 2 {
		t.Fatalf("%d stream runs, want 2", len(rep.Streams))
	}
	for _, r := range rep.Streams {
		name := r.Title()
		// 50/s for 500 ms: 25 messages a stream, whatever the load (the
		// schedule's indices, sent late if need be).
		if r.Rate > 0 && r.Sent != 25*clients {
			t.Errorf("%s: %d messages sent, want %d", name, r.Sent, 25*clients)
		}
		if r.Sent == 0 || r.Send.Errors != 0 {
			t.Errorf("%s: %d messages sent, %d errors (first: %s)", name, r.Sent, r.Send.Errors, r.Send.FirstErr)
		}
		if r.Received != r.Sent || r.Lost != 0 || r.Duplicates != 0 || r.BadEnds != 0 {
			t.Errorf("%s: %d sent, %d received, %d lost, %d duplicates, %d bad ends (%s)", name, r.Sent, r.Received, r.Lost, r.Duplicates, r.BadEnds, r.FirstBadEnd)
		}
		l := r.Latency
		if l.Calls != int(r.Received) || l.Min <= 0 || l.P50 < l.Min || l.P99 < l.P50 || l.Max > 20*time.Second {
			t.Errorf("%s: send to receipt over %d messages: min %v p50 %v p99 %v max %v", name, l.Calls, l.Min, l.P50, l.P99, l.Max)
		}
		if r.SentPerSec() <= 0 || r.DeliveredPerSec() <= 0 || r.GatewayCPU <= 0 || r.Res.StartRSS <= 0 {
			t.Errorf("%s: %.0f sent/s, %.0f delivered/s, gateway CPU %v, resources %+v", name, r.SentPerSec(), r.DeliveredPerSec(), r.GatewayCPU, r.Res)
		}
	}
	var md bytes.Buffer
	if err := rep.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"## Server streams to 8 WebSocket clients", "| **send → receipt p99** |", rep.Streams[1].Title() + " |"} {
		if !strings.Contains(md.String(), s) {
			t.Errorf("the report has no %q", s)
		}
	}
}

// TestStreamTally checks the stream loss accounting: a gap, a lost tail,
// a stream without its end, a duplicate, and the refusals of a seq never
// sent and of a frame of another kind.
func TestStreamTally(t *testing.T) {
	cl := func(end string, seqs ...int64) *streamClient {
		s := &streamClient{maxSeq: -1}
		if end != "" {
			s.end = []byte(end)
		}
		for _, q := range seqs {
			if s.seen.set(q) {
				s.dups++
			}
			s.maxSeq = max(s.maxSeq, q)
			s.lat = append(s.lat, time.Duration(q+1)*time.Millisecond)
		}
		return s
	}
	ok := `{"type":"end","id":"s","status":200,"request_id":"r"}`
	r := StreamsResult{Send: streamResult{Sent: []int64{3, 3, 3}}}
	if err := r.tally([]*streamClient{cl(ok, 0, 1, 2), cl(ok, 0, 2), cl("", 0)}); err != nil {
		t.Fatal(err)
	}
	if r.Sent != 9 || r.Received != 6 || r.Lost != 3 || r.Gaps != 1 || r.LossyClients != 2 || r.BadEnds != 1 || r.Latency.Calls != 6 {
		t.Errorf("tally: %+v", r)
	}
	r = StreamsResult{Send: streamResult{Sent: []int64{2}}}
	if err := r.tally([]*streamClient{cl(ok, 0, 1, 1)}); err != nil || r.Duplicates != 1 || r.Lost != 0 {
		t.Errorf("a duplicate: %v, %+v", err, r)
	}
	r = StreamsResult{Send: streamResult{Sent: []int64{2}}}
	if err := r.tally([]*streamClient{cl(ok, 2)}); err == nil {
		t.Error("a seq never sent on the stream was taken")
	}
	bad := cl(ok, 0)
	bad.bad = "not a msg frame"
	r = StreamsResult{Send: streamResult{Sent: []int64{2}}}
	if err := r.tally([]*streamClient{bad}); err == nil {
		t.Error("a frame of another kind was taken")
	}
}
