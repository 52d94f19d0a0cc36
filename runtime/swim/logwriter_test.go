package swim

import (
	"bytes"
	"context"
	"log"
	"log/slog"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// records keeps the records a slog handler receives.
type records struct{ got []string }

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	var attrs bytes.Buffer
	rec.Attrs(func(a slog.Attr) bool { attrs.WriteString(" " + a.String()); return true })
	r.got = append(r.got, rec.Level.String()+" "+rec.Message+attrs.String())
	return nil
}
func (r *records) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *records) WithGroup(string) slog.Handler      { return r }

func TestLogWriter(t *testing.T) {
	var r records
	l := log.New(logWriter{l: slog.New(&r)}, "", 0) // as memberlist gets it
	l.Printf("[DEBUG] memberlist: Stream connection from=%s", "127.0.0.1:1")
	l.Printf("[INFO] memberlist: Suspect %s has failed, no acks received", "a/1")
	l.Printf("[WARN] memberlist: Refuting a suspect message (from: %s)", "b/2")
	l.Printf("[ERR] memberlist: Failed fallback TCP ping: %v", "timeout")
	l.Printf("[ERROR] memberlist: something")
	l.Printf("Err: Could not set the deadline: %s", "x")
	l.Printf("no prefix")
	want := []string{
		"DEBUG memberlist: Stream connection component=memberlist remote=127.0.0.1:1",
		"INFO memberlist: Suspect a/1 has failed, no acks received component=memberlist",
		"WARN memberlist: Refuting a suspect message (from: b/2) component=memberlist",
		"ERROR memberlist: Failed fallback TCP ping: timeout component=memberlist",
		"ERROR memberlist: something component=memberlist",
		"ERROR Err: Could not set the deadline: x component=memberlist",
		"INFO no prefix component=memberlist",
	}
	if diff := cmp.Diff(want, r.got); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}
}

func TestLogWriterDisabledLevel(t *testing.T) {
	var buf bytes.Buffer
	l := log.New(logWriter{l: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))}, "", 0)
	l.Printf("[DEBUG] memberlist: quiet")
	l.Printf("[WARN] memberlist: loud")
	if got := buf.String(); bytes.Contains(buf.Bytes(), []byte("quiet")) || !bytes.Contains(buf.Bytes(), []byte("loud")) {
		t.Errorf("log = %q", got)
	}
}

func TestCutFrom(t *testing.T) {
	tests := []struct{ line, rest, from string }{
		{"memberlist: msg type (99) not supported from=10.0.0.1:7946", "memberlist: msg type (99) not supported", "10.0.0.1:7946"},
		{"memberlist: Message type (9) not supported from=[::1]:5 (packet handler)", "memberlist: Message type (9) not supported (packet handler)", "[::1]:5"},
		{"memberlist: missing message type byte from=<unknown address>", "memberlist: missing message type byte", "<unknown address>"},
		{"memberlist: Refuting a suspect message (from: b/2)", "memberlist: Refuting a suspect message (from: b/2)", ""},
	}
	for _, tt := range tests {
		rest, from := cutFrom([]byte(tt.line))
		if string(rest) != tt.rest || string(from) != tt.from {
			t.Errorf("cutFrom(%q) = %q, %q; want %q, %q", tt.line, rest, from, tt.rest, tt.from)
		}
	}
}
