package gwbench

import (
	"cmp"
	"strings"
	"testing"
	"time"

	"github.com/wizardmesh/wizard/gateway/config"
)

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
