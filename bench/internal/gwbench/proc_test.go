package gwbench

import (
	"cmp"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/wizardmesh/wizard/gateway/config"
)

// TestStatCPU reads utime and stime from stat lines, a command name with
// spaces and parentheses included.
func TestStatCPU(t *testing.T) {
	for _, c := range []struct {
		line string
		want time.Duration
		ok   bool
	}{
		{"1234 (wizard-gateway) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 8 0 100 0 0", 3 * time.Second, true},
		{"9 (a (b) c) R 1 9 9 0 -1 0 0 0 0 0 7 3 0 0", 100 * time.Millisecond, true},
		{"9 (short) R 1 2 3", 0, false},
		{"no parenthesis", 0, false},
		{"9 (x) R 1 9 9 0 -1 0 0 0 0 0 seven 3 0 0", 0, false},
	} {
		got, err := statCPU(c.line)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("statCPU(%q) = %v, %v; want %v, ok %v", c.line, got, err, c.want, c.ok)
		}
	}
}

func FuzzStatCPU(f *testing.F) {
	f.Add("1234 (wizard-gateway) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 8 0 100 0 0")
	f.Add("9 (a) b) R 1 9 9 0 -1 0 0 0 0 0 7 3")
	f.Fuzz(func(t *testing.T, s string) {
		statCPU(s) // must not panic
	})
}

// TestReadUsage reads this process's memory and CPU: resident memory is
// positive and never above its peak.
func TestReadUsage(t *testing.T) {
	u, err := readUsage(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if u.RSS <= 0 || u.HWM < u.RSS || u.CPU < 0 {
		t.Errorf("usage %+v", u)
	}
	if kib(" 2048 kB") != 2<<20 || kib("x kB") != 0 {
		t.Errorf("kib: %d, %d", kib(" 2048 kB"), kib("x kB"))
	}
}

// TestSummarise checks the percentiles, the mean and the rate.
func TestSummarise(t *testing.T) {
	var lat []time.Duration
	for i := 100; i >= 1; i-- {
		lat = append(lat, time.Duration(i)*time.Millisecond)
	}
	s := summarise(lat, 2, "boom", 2*time.Second)
	if s.Calls != 100 || s.Errors != 2 || s.PerSec != 50 || s.Min != time.Millisecond || s.Max != 100*time.Millisecond ||
		s.P50 != 50*time.Millisecond || s.P75 != 75*time.Millisecond || s.P95 != 95*time.Millisecond || s.P99 != 99*time.Millisecond ||
		s.Mean != 50500*time.Microsecond {
		t.Errorf("summarise: %+v", s)
	}
	if z := summarise(nil, 0, "", time.Second); z.Calls != 0 || z.P99 != 0 {
		t.Errorf("empty: %+v", z)
	}
}

// TestMoleculerGap: without node on PATH, moleculer-web is a gap whose
// reason says so (the report prints it as not measured).
func TestMoleculerGap(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	e := &env{benchDir: t.TempDir(), logf: t.Logf}
	if why := e.prepareMoleculer(t.Context()); !strings.Contains(why, "no node on PATH") {
		t.Errorf("prepareMoleculer without node: %q", why)
	}
	rep := &Report{Gaps: []Gap{{MoleculerWeb, "no node on PATH"}}}
	var b strings.Builder
	if err := rep.WriteMarkdown(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "**Not measured: moleculer-web** — no node on PATH.") {
		t.Errorf("the report does not name the gap:\n%s", b.String())
	}
}

// TestGatewayConfig: the YAML the benchmark writes is one the gateway
// loads, with and without auth.
func TestGatewayConfig(t *testing.T) {
	dir := t.TempDir()
	for _, alg := range []string{"", "HS256", "ES256"} {
		var s *signer
		if alg != "" {
			var err error
			if s, err = newSigner(alg, dir); err != nil {
				t.Fatal(err)
			}
			tok, err := s.token("u1", time.Minute)
			if err != nil || strings.Count(tok, ".") != 2 {
				t.Errorf("%s token %q: %v", alg, tok, err)
			}
		}
		if _, err := config.Parse("bench.yaml", []byte(gatewayConfig(8080, "127.0.0.1:7000", s))); err != nil {
			t.Errorf("%s: %v", cmp.Or(alg, "no auth"), err)
		}
	}
}
