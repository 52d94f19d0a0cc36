package swim

import (
	"math/rand/v2"
	"net"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wizardmesh/wizard/runtime/internal/testkit/leak"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testlog"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
)

// garbagePackets is how many bad packets TestGarbagePacketsLogLimited
// sends.
const garbagePackets = 2000

// TestGarbagePacketsLogLimited (finding 8): 2,000 packets of noise sent to
// the gossip port give a bounded number of log records at Warn and above,
// each naming the sender in a remote attribute, and summaries that count
// the others; before, nearly every packet gave an ERROR record.
func TestGarbagePacketsLogLimited(t *testing.T) {
	for _, tt := range []struct {
		name string
		opts []Option
	}{
		{"plain", nil},
		{"encrypted", []Option{WithKeys(make([]byte, 16))}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			leak.Check(t)
			var logs testlog.Buffer
			d := mustNew(t, append([]Option{WithBindAddr("127.0.0.1:0"), WithPreset(Fast), WithLogger(logs.Logger())}, tt.opts...)...)
			if err := d.Start(newFakeHost("g", "127.0.0.1:7000")); err != nil {
				t.Fatal(err)
			}
			c, err := net.Dial("udp", d.GossipAddr())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			rng := rand.New(rand.NewPCG(3, 4))
			packet := make([]byte, 64)
			start := time.Now()
			for i := range garbagePackets {
				for j := range packet {
					packet[j] = byte(rng.Uint32())
				}
				// A message type (or, encrypted, a version) that is none:
				// memberlist reports each packet once.
				packet[0] = byte(100 + i%100)
				if _, err := c.Write(packet); err != nil {
					t.Fatal(err)
				}
				if i%50 == 49 { // within the socket's buffer
					testwait.Until(t, "the node did not read the packets", func() bool { return d.memberlistLog.Events() > i })
				}
			}
			elapsed := time.Since(start)
			d.Close() // logs what is still suppressed
			checkLimitedLog(t, logs.String(), c.LocalAddr().String(), garbagePackets, elapsed)
		})
	}
}

// suppressedRE finds the count of a summary record.
var suppressedRE = regexp.MustCompile(`suppressed=(\d+)`)

// checkLimitedLog checks the records at Warn and above in log: at most
// ten per ten seconds for events from addr, each naming it, and
// summaries.
func checkLimitedLog(t *testing.T, log, addr string, events int, elapsed time.Duration) {
	t.Helper()
	logged, suppressed, anonymous := 0, 0, 0
	for line := range strings.Lines(log) {
		if !strings.Contains(line, "level=WARN") && !strings.Contains(line, "level=ERROR") {
			continue
		}
		if m := suppressedRE.FindStringSubmatch(line); m != nil {
			n, _ := strconv.Atoi(m[1])
			suppressed += n
			continue
		}
		logged++
		if !strings.Contains(line, "remote="+addr) {
			anonymous++
		}
	}
	if anonymous > 0 {
		t.Errorf("%d records without the sender's address", anonymous)
	}
	windows := int(elapsed/(10*time.Second)) + 1
	if limit := 10 * windows; logged > limit {
		t.Errorf("%d records for %d packets in %v, want at most %d", logged, events, elapsed, limit)
	}
	if logged+suppressed != events {
		t.Errorf("%d records and %d suppressed, want %d in all", logged, suppressed, events)
	}
	if t.Failed() {
		t.Logf("the log begins:\n%s", log[:min(len(log), 2000)])
	}
}
