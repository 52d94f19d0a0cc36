package gwbench

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"
)

// TestEventsSmoke runs both event push passes with a few clients at a low
// rate against the real wizard-gateway binary and an emitter process:
// every event must reach every client it is for, once, with a plausible
// latency, and the report must hold the section.
func TestEventsSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("builds wizard-gateway and starts the echo, emitter and gateway processes; not in -short")
	}
	const clients = 8
	cfg := Config{
		Events:  EventsConfig{Clients: clients, Passes: []string{"broadcast", "per-user"}, Rates: []int{50}, UserRates: []int{100}, Duration: 500 * time.Millisecond},
		Command: "go test",
	}
	if testing.Verbose() {
		cfg.Log = os.Stderr
	}
	rep, err := Run(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Events) != 2 {
		t.Fatalf("%d event push passes, want 2", len(rep.Events))
	}
	for _, r := range rep.Events {
		name := r.Pass.Name
		// 50/s or 100/s for 500 ms: 25 or 50 events, whatever the load
		// (the schedule's indices, emitted late if need be).
		want := int64(25)
		if r.Pass.PerUser {
			want = 50
		}
		if r.Emit.Emitted != want || r.Emit.Errors != 0 {
			t.Errorf("%s: %d events emitted, %d errors (first: %s); want %d, 0", name, r.Emit.Emitted, r.Emit.Errors, r.Emit.FirstErr, want)
		}
		exp := want * clients
		if r.Pass.PerUser {
			exp = want
		}
		if r.Expected != exp || r.Received != exp || r.Lost != 0 || r.Duplicates != 0 {
			t.Errorf("%s: %d frames expected (want %d), %d received, %d lost, %d duplicates", name, r.Expected, exp, r.Received, r.Lost, r.Duplicates)
		}
		// Plausible: after the emit, and not beyond the guard of a loaded
		// machine.
		l := r.Latency
		if l.Calls != int(r.Received) || l.Min <= 0 || l.P50 < l.Min || l.P99 < l.P50 || l.Max > 20*time.Second {
			t.Errorf("%s: emit to receipt over %d frames: min %v p50 %v p99 %v max %v", name, l.Calls, l.Min, l.P50, l.P99, l.Max)
		}
		if r.EmittedPerSec() <= 0 || r.DeliveredPerSec() <= 0 || r.Res.StartRSS <= 0 || r.Res.MaxRSS < r.Res.StartRSS {
			t.Errorf("%s: %.0f emitted/s, %.0f delivered/s, resources %+v", name, r.EmittedPerSec(), r.DeliveredPerSec(), r.Res)
		}
	}
	var md bytes.Buffer
	if err := rep.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"## Event push to 8 WebSocket clients", "| **emit → receipt p99** |", rep.Events[1].Title() + " |"} {
		if !strings.Contains(md.String(), s) {
			t.Errorf("the report has no %q", s)
		}
	}
}

func TestEventFields(t *testing.T) {
	for _, c := range []struct {
		in     string
		seq, t int64
		ok     bool
	}{
		{`{"type":"event","sub":"e","pattern":"event:tick,role:gwbench","data":{"event":"tick","role":"gwbench","seq":12,"t":1700000000000000001}}`, 12, 1700000000000000001, true},
		{`{"type":"event","sub":"e","pattern":"p","data":{"t":5,"seq":0}}`, 0, 5, true},
		{`{"type":"event","sub":"e","pattern":"p","data":{"seq":1}}`, 0, 0, false},
		{`{"type":"res","id":"e","status":200}`, 0, 0, false},
		{`{"type":"event","sub":"e","pattern":"p","data":{"seq":-1,"t":5}}`, 0, 0, false},
	} {
		seq, tt, ok := eventFields([]byte(c.in))
		if ok != c.ok || ok && (seq != c.seq || tt != c.t) {
			t.Errorf("eventFields(%s) = %d, %d, %v; want %d, %d, %v", c.in, seq, tt, ok, c.seq, c.t, c.ok)
		}
	}
	var b bitset
	for _, i := range []int64{0, 63, 64, 200, 63} {
		b.set(i)
	}
	if n := b.count(); n != 4 {
		t.Errorf("bitset count %d, want 4", n)
	}
}

// TestTally checks the loss accounting: a gap below a later seq, a lost
// tail, a client that heard nothing, a duplicate, and the refusals of a
// seq never emitted and of a frame of another subscription.
func TestTally(t *testing.T) {
	sub := func(seqs ...int64) *subscriber {
		s := &subscriber{maxSeq: -1}
		for _, q := range seqs {
			if s.seen.set(q) {
				s.dups++
			}
			s.maxSeq = max(s.maxSeq, q)
			s.lat = append(s.lat, time.Duration(q+1)*time.Millisecond)
		}
		return s
	}
	want := []int64{4, 4, 4, 4}
	subs := []*subscriber{sub(0, 1, 2, 3), sub(0, 2, 3), sub(0, 1), sub()} // the fourth heard nothing
	var r EventsResult
	if err := r.tally(want, subs); err != nil {
		t.Fatal(err)
	}
	// Lost: 1 (a gap) + 2 (a tail) + 4 (nothing) = 7, of them 1 a gap.
	if r.Received != 9 || r.Lost != 7 || r.Gaps != 1 || r.LossyClients != 3 || r.MaxLost != 4 || r.Duplicates != 0 || r.Latency.Calls != 9 {
		t.Errorf("tally: %+v", r)
	}
	r = EventsResult{}
	if err := r.tally([]int64{4}, []*subscriber{sub(0, 1, 1, 2, 3)}); err != nil || r.Received != 5 || r.Duplicates != 1 || r.Lost != 0 {
		t.Errorf("a duplicate: %v, %+v", err, r)
	}
	r = EventsResult{}
	if err := r.tally([]int64{4}, []*subscriber{sub(4)}); err == nil {
		t.Error("a seq never emitted to the client was taken")
	}
	bad := sub(0)
	bad.bad = "not an event frame of its subscription"
	if err := r.tally([]int64{4}, []*subscriber{bad}); err == nil {
		t.Error("a frame of another subscription was taken")
	}
}
