package ratelog

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/wizardmesh/wizard/runtime/internal/testkit/testlog"
)

// lines returns the records logged to buf, one per line, without their
// time.
func lines(buf *testlog.Buffer) []string {
	var out []string
	for line := range strings.Lines(buf.String()) {
		_, rest, _ := strings.Cut(strings.TrimSpace(line), " ")
		out = append(out, rest)
	}
	return out
}

func newText(buf *testlog.Buffer) slog.Handler {
	return slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})
}

// TestLimiter: the first Burst events of an interval pass, the others are
// counted in one summary when the interval ends; the next interval starts
// afresh.
func TestLimiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf testlog.Buffer
		l := NewLimiter(newText(&buf), "bad packets")
		defer l.Close()
		passed := 0
		for range 25 {
			if l.Allow(slog.LevelWarn) {
				passed++
			}
		}
		if l.Allow(slog.LevelError) {
			passed++
		}
		if passed != Burst {
			t.Errorf("%d events passed, want %d", passed, Burst)
		}
		if buf.String() != "" {
			t.Errorf("a summary before the interval ended: %q", buf.String())
		}
		time.Sleep(Interval)
		synctest.Wait()
		want := []string{`level=ERROR msg="bad packets: 16 more suppressed" suppressed=16 interval=10s`}
		if diff := cmp.Diff(want, lines(&buf)); diff != "" {
			t.Errorf("summary (-want +got):\n%s", diff)
		}

		// A new interval: events pass again; nothing suppressed, no summary.
		logged := len(lines(&buf))
		for i := range Burst {
			if !l.Allow(slog.LevelWarn) {
				t.Fatalf("event %d of a new interval suppressed", i)
			}
		}
		time.Sleep(2 * Interval)
		synctest.Wait()
		if got := lines(&buf); len(got) != logged {
			t.Errorf("a summary with nothing suppressed: %q", got[logged:])
		}
	})
}

// TestLimiterClose: Close logs what is suppressed so far; later events
// pass.
func TestLimiterClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf testlog.Buffer
		l := NewLimiter(newText(&buf), "x")
		for range Burst + 3 {
			l.Allow(slog.LevelWarn)
		}
		l.Close()
		l.Close()
		want := []string{`level=WARN msg="x: 3 more suppressed" suppressed=3 interval=10s`}
		if diff := cmp.Diff(want, lines(&buf)); diff != "" {
			t.Errorf("summary (-want +got):\n%s", diff)
		}
		if !l.Allow(slog.LevelWarn) {
			t.Error("an event after Close suppressed")
		}
	})
}

// TestLimiterLateTimer: an event after the interval ended, before the
// timer ran, ends the interval itself.
func TestLimiterLateTimer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf testlog.Buffer
		l := NewLimiter(newText(&buf), "x")
		defer l.Close()
		for range Burst + 1 {
			l.Allow(slog.LevelWarn)
		}
		time.Sleep(Interval) // the timer and this goroutine wake together
		if !l.Allow(slog.LevelWarn) {
			t.Error("the first event of a new interval suppressed")
		}
		synctest.Wait()
		if n := strings.Count(buf.String(), "suppressed=1 "); n != 1 {
			t.Errorf("%d summaries, want 1:\n%s", n, buf.String())
		}
	})
}

// TestHandler: records at Warn and above are limited per message, with
// the attributes of the logger that logged them; summaries go to the
// wrapped handler without those; records below Warn pass.
func TestHandler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf testlog.Buffer
		h := NewHandler(newText(&buf))
		log := slog.New(h)
		for i := range Burst + 2 {
			log.With("remote", i).Warn("closed")
			log.Warn("other")
			log.Debug("debug")
		}
		h.Close()
		got := lines(&buf)
		count := func(prefix string) int {
			n := 0
			for _, l := range got {
				if strings.HasPrefix(l, prefix) {
					n++
				}
			}
			return n
		}
		if n := count("level=WARN msg=closed remote="); n != Burst {
			t.Errorf("%d records of closed, want %d", n, Burst)
		}
		if n := count("level=WARN msg=other"); n != Burst {
			t.Errorf("%d records of other, want %d", n, Burst)
		}
		if n := count("level=DEBUG msg=debug"); n != Burst+2 {
			t.Errorf("%d debug records, want %d", n, Burst+2)
		}
		for _, want := range []string{
			`level=WARN msg="closed: 2 more suppressed" suppressed=2 interval=10s`,
			`level=WARN msg="other: 2 more suppressed" suppressed=2 interval=10s`,
		} {
			if count(want) != 1 {
				t.Errorf("no summary %s in:\n%s", want, buf.String())
			}
		}
		if !h.Enabled(context.Background(), slog.LevelDebug) {
			t.Error("Enabled(debug) = false, the wrapped handler's is true")
		}
	})
}

// TestHandlerManyMessages: beyond maxMessages messages, records share one
// limiter.
func TestHandlerManyMessages(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf testlog.Buffer
		h := NewHandler(newText(&buf))
		log := slog.New(h)
		for i := range maxMessages + 3*Burst {
			log.Warn(strings.Repeat("m", i+1))
		}
		h.Close()
		if got := len(h.shared.byMsg); got != maxMessages {
			t.Errorf("%d limiters by message, want %d", got, maxMessages)
		}
		if !strings.Contains(buf.String(), `msg="other log records: 20 more suppressed"`) {
			t.Errorf("no summary of the other records:\n%s", buf.String())
		}
	})
}
