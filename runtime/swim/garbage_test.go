package swim

import (
	"math/rand/v2"
	"net"
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
			testlog.CheckLimited(t, logs.String(), "", c.LocalAddr().String(), garbagePackets, elapsed)
		})
	}
}
