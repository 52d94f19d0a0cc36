package harness

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestPrepareSkipsWithGap checks that a contender whose Prepare reports a
// missing toolchain is dropped from the run with a log line and a gap
// that names it and the reason, and that the others stay in order.
func TestPrepareSkipsWithGap(t *testing.T) {
	ok := Contender{Name: "a", Title: "A"}
	missing := Contender{Name: "b", Title: "B", Prepare: func(context.Context) string { return "no b on PATH" }}
	ready := Contender{Name: "c", Title: "C", Prepare: func(context.Context) string { return "" }}
	var log bytes.Buffer
	rep := &Report{}
	got := prepare(t.Context(), []Contender{ok, missing, ready}, rep, func(f string, a ...any) {
		log.WriteString(strings.Join(strings.Fields(fmt.Sprintf(f, a...)), " ") + "\n")
	})
	if len(got) != 2 || got[0].Name != "a" || got[1].Name != "c" {
		t.Fatalf("prepare kept %v, want a and c", names(got))
	}
	if len(rep.Gaps) != 1 || rep.Gaps[0] != (Gap{Title: "B", Reason: "no b on PATH"}) {
		t.Fatalf("gaps %+v, want one for B", rep.Gaps)
	}
	if !strings.Contains(log.String(), "B skipped: no b on PATH") {
		t.Errorf("no skip line in the log:\n%s", log.String())
	}
	var md strings.Builder
	if err := rep.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "**Not measured: B** — no b on PATH.") {
		t.Errorf("the report does not name the skipped contender:\n%s", md.String())
	}
}

func names(cs []Contender) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}

// TestParseNodeSample checks the decoding of a Node.js script's sample
// and that an impossible or malformed one is an error naming the script.
func TestParseNodeSample(t *testing.T) {
	s, err := parseNodeSample("node x", []byte(`{"calls":2000,"windowNs":1000000000,"errors":1,"firstErr":"boom","p50Ns":25000,"p99Ns":90000}`))
	if err != nil {
		t.Fatal(err)
	}
	if s.Calls != 2000 || s.PerSec != 2000 || s.Window != time.Second || s.P50 != 25*time.Microsecond || s.P99 != 90*time.Microsecond ||
		s.Errors != 1 || s.FirstErr == nil || s.FirstErr.Error() != "boom" {
		t.Errorf("decoded %+v", s)
	}
	for _, bad := range []string{``, `[]`, `{"calls":-1}`, `{"p50Ns":5,"p99Ns":4}`, `{"calls":"x"}`} {
		if _, err := parseNodeSample("node x", []byte(bad)); err == nil || !strings.Contains(err.Error(), "node x") {
			t.Errorf("%q: err = %v, want an error naming the script", bad, err)
		}
	}
}

// TestSplitAddrs checks the two composite server addresses.
func TestSplitAddrs(t *testing.T) {
	srv, port, err := splitMoleculerAddr("127.0.0.1:4000 client 127.0.0.1:4001")
	if err != nil || srv != "127.0.0.1:4000" || port != "4001" {
		t.Errorf("splitMoleculerAddr = %q, %q, %v", srv, port, err)
	}
	for _, bad := range []string{"", "127.0.0.1:4000", "127.0.0.1:4000 client x", "x client 127.0.0.1:1"} {
		if _, _, err := splitMoleculerAddr(bad); err == nil {
			t.Errorf("splitMoleculerAddr(%q) took it", bad)
		}
	}
	url, subject, err := splitNATSAddr("nats://127.0.0.1:4222/wizard.node.abc")
	if err != nil || url != "nats://127.0.0.1:4222" || subject != "wizard.node.abc" {
		t.Errorf("splitNATSAddr = %q, %q, %v", url, subject, err)
	}
	for _, bad := range []string{"", "nats://127.0.0.1:4222", "nats://127.0.0.1:4222/", "tcp://h:1/s", "nats:///s"} {
		if _, _, err := splitNATSAddr(bad); err == nil {
			t.Errorf("splitNATSAddr(%q) took it", bad)
		}
	}
}

// FuzzParseNodeSample: any output decodes to a sane sample or an error.
func FuzzParseNodeSample(f *testing.F) {
	f.Add([]byte(`{"calls":2000,"windowNs":1000000000,"errors":0,"firstErr":"","p50Ns":25000,"p99Ns":90000}`))
	f.Add([]byte(`{"calls":0,"windowNs":0}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := parseNodeSample("node x", b)
		if err != nil {
			return
		}
		if s.Calls < 0 || s.Errors < 0 || s.PerSec < 0 || s.P99 < s.P50 || s.P50 < 0 {
			t.Fatalf("%q decoded to an impossible sample %+v", b, s)
		}
	})
}

// FuzzSplitAddrs: the address splitters never panic, and what they
// accept joins back to the input.
func FuzzSplitAddrs(f *testing.F) {
	f.Add("127.0.0.1:4000 client 127.0.0.1:4001")
	f.Add("nats://127.0.0.1:4222/wizard.node.abc")
	f.Fuzz(func(t *testing.T, addr string) {
		if srv, port, err := splitMoleculerAddr(addr); err == nil && (srv == "" || port == "" || !strings.HasPrefix(addr, srv+" client ")) {
			t.Fatalf("splitMoleculerAddr(%q) = %q, %q", addr, srv, port)
		}
		if url, subject, err := splitNATSAddr(addr); err == nil && (url+"/"+subject != addr || subject == "") {
			t.Fatalf("splitNATSAddr(%q) = %q, %q", addr, url, subject)
		}
	})
}
