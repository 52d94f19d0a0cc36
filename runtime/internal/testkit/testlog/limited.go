package testlog

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// suppressedRE finds the count of a rate limiter's summary record.
var suppressedRE = regexp.MustCompile(`suppressed=(\d+)`)

// CheckLimited checks the records at Warn and above in log about events
// that untrusted input caused, which a rate limiter holds back: the
// records containing what ("" for any) number at most ten per ten
// seconds of elapsed, each names the sender (contains "remote=" +
// remote, an address or its prefix), and with the summaries' counts of
// the records suppressed they account for every one of the events.
func CheckLimited(t testing.TB, log, what, remote string, events int, elapsed time.Duration) {
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
		if !strings.Contains(line, what) {
			continue
		}
		logged++
		if !strings.Contains(line, "remote="+remote) {
			anonymous++
		}
	}
	if anonymous > 0 {
		t.Errorf("%d records without the sender's address", anonymous)
	}
	windows := int(elapsed/(10*time.Second)) + 1
	if limit := 10 * windows; logged > limit {
		t.Errorf("%d records for %d events in %v, want at most %d", logged, events, elapsed, limit)
	}
	if logged+suppressed != events {
		t.Errorf("%d records and %d suppressed, want %d in all", logged, suppressed, events)
	}
	if t.Failed() {
		t.Logf("the log begins:\n%s", log[:min(len(log), 2000)])
	}
}
