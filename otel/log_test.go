package wizotel_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"

	wizotel "github.com/wizardmesh/wizard/otel"
	"github.com/wizardmesh/wizard/runtime"
	"go.opentelemetry.io/otel/trace"
)

// syncBuffer is a bytes.Buffer safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) lines(t *testing.T) []map[string]any {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(s.b.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

// TestLogTraceIDs: a record a remote handler logs with its ctx carries the
// trace and span ids of the handler's server span; one logged outside a
// span carries none.
func TestLogTraceIDs(t *testing.T) {
	tm := newTelemetry(t)
	var buf syncBuffer
	log := slog.New(wizotel.NewLogHandler(slog.NewJSONHandler(&buf, nil))).With("node", "srv")
	srv := server(t, tcpTransport(t), nil, tm.option())
	if err := srv.Add("role:greet", func(ctx context.Context, r runtime.Request) (any, error) {
		log.InfoContext(ctx, "in handler")
		return "hi", nil
	}); err != nil {
		t.Fatal(err)
	}
	cl := client(t, tcpTransport(t), []string{srv.Addr()}, tm.option())
	waitFor(t, cl, "role:greet", 1)
	if _, err := cl.ActE(callCtx(t), "role:greet", nil); err != nil {
		t.Fatal(err)
	}
	log.InfoContext(context.Background(), "outside")

	served := one(t, tm.ended(), "role:greet", trace.SpanKindServer)
	lines := buf.lines(t)
	if len(lines) != 2 {
		t.Fatalf("%d log lines, want 2: %v", len(lines), lines)
	}
	in, out := lines[0], lines[1]
	if in["trace_id"] != served.SpanContext.TraceID().String() || in["span_id"] != served.SpanContext.SpanID().String() || in["node"] != "srv" {
		t.Errorf("the handler's record %v; want trace_id %s, span_id %s and node srv", in, served.SpanContext.TraceID(), served.SpanContext.SpanID())
	}
	if _, ok := out["trace_id"]; ok {
		t.Errorf("a record outside a span has a trace id: %v", out)
	}
}
