package tcp_test

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testlog"
	"github.com/wizardmesh/wizard/runtime/tcp"
)

// failedHandshakes is how many bad handshakes TestHandshakeLogLimited
// sends.
const failedHandshakes = 200

// TestHandshakeLogLimited (finding 8): 200 connections that fail the
// handshake give a bounded number of warnings, each naming the remote
// address, and a summary that counts the others; before, each gave a
// warning of its own without the address.
func TestHandshakeLogLimited(t *testing.T) {
	var logs testlog.Buffer
	srv := newServer(t, runtime.WithTransport(newTransport(t, tcp.WithLogger(logs.Logger()))))
	start := time.Now()
	for range failedHandshakes {
		r := dialRaw(t, srv.Addr())
		r.write([]byte("XXXX\x01\x00\x00\x00"))
		r.waitClosed()
		r.c.Close()
	}
	elapsed := time.Since(start)
	srv.Close() // logs what is still suppressed
	checkLimitedLog(t, logs.String(), "bad handshake magic", failedHandshakes, elapsed)
}

// suppressedRE finds the count of a summary record.
var suppressedRE = regexp.MustCompile(`suppressed=(\d+)`)

// checkLimitedLog checks the warnings about events (containing what)
// in log: at most ten per ten seconds each naming a remote address on
// 127.0.0.1, and summaries counting the rest, so that every event is
// accounted for.
func checkLimitedLog(t *testing.T, log, what string, events int, elapsed time.Duration) {
	t.Helper()
	logged, suppressed, anonymous := 0, 0, 0
	for line := range strings.Lines(log) {
		if !strings.Contains(line, "level=WARN") {
			continue
		}
		if m := suppressedRE.FindStringSubmatch(line); m != nil {
			n, _ := strconv.Atoi(m[1])
			suppressed += n
			continue
		}
		if !strings.Contains(line, what) {
			continue
		}
		logged++
		if !strings.Contains(line, "remote=127.0.0.1:") {
			anonymous++
		}
	}
	if anonymous > 0 {
		t.Errorf("%d warnings without the remote address", anonymous)
	}
	windows := int(elapsed/(10*time.Second)) + 1
	if limit := 10 * windows; logged > limit {
		t.Errorf("%d warnings for %d events in %v, want at most %d", logged, events, elapsed, limit)
	}
	if logged+suppressed != events {
		t.Errorf("%d warnings and %d suppressed, want %d in all", logged, suppressed, events)
	}
	if t.Failed() {
		t.Logf("the log begins:\n%s", log[:min(len(log), 2000)])
	}
}
