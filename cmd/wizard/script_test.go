package main

import (
	"encoding/json"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/wizardmesh/wizard/internal/version"
)

// TestScriptable: what a script relies on. --help prints on the standard
// output, version names the build, a failed call exits with its code
// (64 + the wizard code, as grpcurl), a refused connection fails at once
// naming the refusal, a bench whose calls all fail says why, and a GLOB of
// pairs matches patterns whatever their other keys.
func TestScriptable(t *testing.T) {
	m := newTestMesh(t, "tcp", nil)

	t.Run("help on stdout", func(t *testing.T) {
		for _, args := range [][]string{{"--help"}, {"-h"}, {"act", "--help"}, {"patterns", "-h"}, {"help", "bench"}} {
			r := wizard(t, "", args...)
			if r.code != 0 || !strings.HasPrefix(r.out, "usage: wizard ") || r.err != "" {
				t.Errorf("wizard %s: exit %d, stdout %.40q, stderr %.40q; want exit 0, the usage on stdout alone", strings.Join(args, " "), r.code, r.out, r.err)
			}
		}
		if r := wizard(t, ""); r.code != 2 || r.out != "" || !strings.HasPrefix(r.err, "usage: wizard ") {
			t.Errorf("wizard without a command: exit %d, stdout %.40q; want exit 2, the usage on stderr", r.code, r.out)
		}
		if r := wizard(t, "", "act", "--bogus"); r.code != 2 || r.out != "" || !strings.Contains(r.err, "-bogus") {
			t.Errorf("wizard act --bogus: exit %d, stdout %.40q; want exit 2, the complaint on stderr", r.code, r.out)
		}
	})

	t.Run("version", func(t *testing.T) {
		r := wizard(t, "", "version")
		lines := strings.Split(strings.TrimSuffix(r.out, "\n"), "\n")
		if r.code != 0 || len(lines) != 3 || lines[0] != "wizard "+version.Release || !strings.HasPrefix(lines[1], "commit ") || lines[2] != "go     "+runtime.Version() {
			t.Errorf("version: exit %d:\n%s%s", r.code, r.out, r.err)
		}
		r = wizard(t, "", "version", "--output", "json")
		var v version.Info
		if err := json.Unmarshal([]byte(r.out), &v); err != nil || v.Module != "github.com/wizardmesh/wizard" || v.Version != version.Release || v.Go != runtime.Version() {
			t.Errorf("version JSON %s (%v)", r.out, err)
		}
	})

	t.Run("exit codes", func(t *testing.T) {
		for _, tt := range []struct {
			name string
			args []string
			code int
		}{
			{"invalid_argument", []string{"cmd:div,role:math", "dividend:1,divisor:0"}, 64 + 3},
			{"not_found", []string{"role:nobody,cmd:x"}, 64 + 5},
			{"deadline_exceeded", []string{"--timeout", "200ms", "role:slow"}, 64 + 4},
			{"usage", []string{"cmd:sum,role:math", "values:[1,"}, 2},
		} {
			if r := m.run(t, "act", tt.args...); r.code != tt.code {
				t.Errorf("%s: exit %d (%s), want %d", tt.name, r.code, r.err, tt.code)
			}
		}
	})

	t.Run("refused", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close() // nothing listens there now: a dial is refused
		start := time.Now()
		r := wizard(t, "", "act", "--peers", addr, "--timeout", "30s", "role:echo")
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("took %v with --timeout 30s; a refused connection should fail at once", d)
		}
		if r.code != 64+14 || !strings.Contains(r.err, "connection refused") {
			t.Errorf("exit %d, stderr %s; want exit 78 (unavailable) naming the refusal", r.code, r.err)
		}
	})

	t.Run("bench every call failed", func(t *testing.T) {
		r := m.run(t, "bench", "-c", "1", "-d", "100ms", "-warmup", "0s", "cmd:div,role:math", "dividend:1,divisor:0")
		if r.code != 1 || strings.Contains(r.out, "p50") || !strings.Contains(r.out, "latency   none: no call succeeded") ||
			!strings.Contains(r.out, "first invalid_argument: mathsvc: division of 1 by zero") {
			t.Errorf("exit %d, out:\n%s\nwant exit 1, no percentiles, the error's message", r.code, r.out)
		}
		r = m.run(t, "bench", "--output", "json", "-c", "1", "-d", "100ms", "-warmup", "0s", "cmd:div,role:math", "dividend:1,divisor:0")
		var b map[string]any
		if err := json.Unmarshal([]byte(r.out), &b); err != nil {
			t.Fatalf("%q: %v", r.out, err)
		}
		if _, ok := b["p50_ms"]; ok || b["messages"] == nil {
			t.Errorf("bench JSON %s: want no p50_ms, the messages by code", r.out)
		}
	})

	t.Run("patterns glob of pairs", func(t *testing.T) {
		r := m.run(t, "patterns", "--output", "json", "role:m*")
		var ps []patternJSON
		if err := json.Unmarshal([]byte(r.out), &ps); err != nil {
			t.Fatalf("%q: %v", r.out, err)
		}
		var got []string
		for _, p := range ps {
			got = append(got, p.Pattern)
		}
		if want := "cmd:add,role:math cmd:count,role:math cmd:div,role:math cmd:echo,role:math cmd:product,role:math cmd:sum,role:math cmd:total,role:math"; strings.Join(got, " ") != want {
			t.Errorf("patterns role:m*: %v, want %s", got, want)
		}
	})
}
