package runtime_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log"
	"log/slog"
	"strings"
	"testing"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testlog"
)

// These tests change the process's default logger (slog.SetDefault, the
// log package's output): they never run in parallel, and restore both.

// useLogOutput sends the log package's output, which the standard
// slog.Default() writes through, to buf until the test ends.
func useLogOutput(t *testing.T, buf *testlog.Buffer) {
	t.Helper()
	old, flags := log.Writer(), log.Flags()
	log.SetOutput(buf)
	log.SetFlags(0)
	t.Cleanup(func() { log.SetOutput(old); log.SetFlags(flags) })
}

// useDefault makes l the default logger until the test ends.
func useDefault(t *testing.T, l *slog.Logger) {
	t.Helper()
	old, def := log.Writer(), slog.Default()
	slog.SetDefault(l)
	t.Cleanup(func() { slog.SetDefault(def); log.SetOutput(old) })
}

func panicking(n *runtime.Node, t *testing.T) {
	t.Helper()
	if err := n.Add("role:log,cmd:panic", func(ctx context.Context, req runtime.Request) (any, error) {
		panic("boom in the handler")
	}); err != nil {
		t.Fatal(err)
	}
	_, err := n.ActE(t.Context(), "role:log,cmd:panic", nil)
	if runtime.CodeOf(err) != runtime.CodeInternal {
		t.Fatalf("a panicking handler: %v, want internal", err)
	}
}

// TestDefaultLogPanic: without WithLogger a panicking handler is logged
// to slog.Default(); through the standard handler (the log package, as
// in a program that set nothing) the stack follows on lines of its own,
// not quoted on one line with escaped newlines.
func TestDefaultLogPanic(t *testing.T) {
	var buf testlog.Buffer
	useLogOutput(t, &buf)
	n := newTestNode(t)
	panicking(n, t)
	out := buf.String()
	t.Logf("logged:\n%s", out)
	// The panic's record: its line, then the stack's up to the frame that
	// created the goroutine (other nodes of earlier tests may log too).
	i := strings.Index(out, "ERROR wizard: handler panicked")
	if i < 0 {
		t.Fatal("no panic record")
	}
	record := out[i:]
	if j := strings.Index(record, "\ncreated by "); j >= 0 {
		if k := strings.Index(record[j+1:], "\n\t"); k >= 0 {
			if end := strings.Index(record[j+1+k+2:], "\n"); end >= 0 {
				record = record[:j+1+k+2+end+1]
			}
		}
	}
	first, rest, _ := strings.Cut(record, "\n")
	if !strings.Contains(first, `panic="boom in the handler"`) || !strings.Contains(first, "pattern=cmd:panic,role:log") {
		t.Errorf("first line %q: want the panic record", first)
	}
	if !strings.HasPrefix(rest, "goroutine ") || !strings.Contains(rest, "/logdefault_test.go:") {
		t.Errorf("no stack on the following lines:\n%s", rest)
	}
	if strings.Contains(record, `\n`) || strings.Contains(record, `\t`) {
		t.Errorf("escaped newlines or tabs in the record:\n%s", record)
	}
}

// TestDefaultLogStructured: with another default handler the stack is one
// attribute holding the stack's lines (a JSON string with its newlines),
// and records below Warn are not logged.
func TestDefaultLogStructured(t *testing.T) {
	var buf testlog.Buffer
	useDefault(t, slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	n := newTestNode(t)
	panicking(n, t)
	var rec map[string]any
	dec := json.NewDecoder(bytes.NewReader([]byte(buf.String())))
	found := false
	for dec.More() {
		rec = nil
		if err := dec.Decode(&rec); err != nil {
			t.Fatalf("%v in %s", err, buf.String())
		}
		if rec["level"] != "WARN" && rec["level"] != "ERROR" {
			t.Errorf("a record below warn: %v", rec)
		}
		if rec["msg"] == "wizard: handler panicked" {
			found = true
			stack, _ := rec["stack"].(string)
			if strings.Count(stack, "\n") < 3 || !strings.Contains(stack, "logdefault_test.go:") {
				t.Errorf("stack %q: want the stack's lines", stack)
			}
		}
	}
	if !found {
		t.Errorf("no panic record in %s", buf.String())
	}
}

// TestLoggerDiscard: WithLogger with a discard handler silences the node;
// WithLogger replaces the default.
func TestLoggerDiscard(t *testing.T) {
	var def, own testlog.Buffer
	useLogOutput(t, &def)
	panicking(newTestNode(t, runtime.WithLogger(slog.New(slog.DiscardHandler))), t)
	panicking(newTestNode(t, runtime.WithLogger(own.Logger())), t)
	if def.String() != "" {
		t.Errorf("the default logger got records:\n%s", def.String())
	}
	if !strings.Contains(own.String(), "wizard: handler panicked") {
		t.Errorf("WithLogger's logger has no panic record:\n%s", own.String())
	}
}
