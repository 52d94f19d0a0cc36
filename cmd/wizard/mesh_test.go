package main

import (
	"bytes"
	"context"
	"flag"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/wizardmesh/wizard/examples/services/mathsvc"
	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/quic"
	"github.com/wizardmesh/wizard/runtime/swim"
	"github.com/wizardmesh/wizard/runtime/tcp"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

// testMesh is three nodes on 127.0.0.1, joined by gossip:
//
//	node-a  the typed math service
//	node-b  untyped: DESIGN §2's precedence patterns, an echo and a slow handler
//	node-c  the math service again, and a:*,b:2
type testMesh struct {
	nodes  []*runtime.Node
	gossip string // node-a's gossip address: the seed
	kind   string
	key    []byte
	slow   chan struct{} // a call entered node-b's role:slow handler

	pki     *testPKI // mutual TLS between the nodes (TCP), nil for none
	segment string
}

func newTestMesh(t *testing.T, kind string, key []byte) *testMesh {
	t.Helper()
	m := &testMesh{kind: kind, key: key, slow: make(chan struct{}, 16)}
	m.startAll(t)
	return m
}

// startAll starts the three nodes and waits for the mesh to form.
func (m *testMesh) startAll(t *testing.T) {
	t.Helper()
	for _, id := range []string{"node-a", "node-b", "node-c"} {
		n, d := m.start(t, id)
		m.nodes = append(m.nodes, n)
		if m.gossip == "" {
			m.gossip = d.GossipAddr()
		}
		if err := m.register(id, n); err != nil {
			t.Fatal(err)
		}
	}
	// Every node routes the others' patterns: the mesh is formed.
	until(t, "the mesh to form", func() bool {
		for _, n := range m.nodes {
			ms := n.Members()
			if len(ms) != 3 {
				return false
			}
			for _, mb := range ms[1:] {
				if !mb.Connected || mb.Patterns == 0 {
					return false
				}
			}
		}
		return true
	})
}

func (m *testMesh) start(t *testing.T, id string) (*runtime.Node, *swim.Discovery) {
	var tr runtime.Transport
	var err error
	switch m.kind {
	case "quic":
		tr, err = quic.New(quic.WithInsecureSelfSigned())
	case "tcp":
		var opts []tcp.Option
		if m.pki != nil {
			opts = append(opts, tcp.WithServerTLS(m.pki.server), tcp.WithClientTLS(m.pki.client))
		}
		tr, err = tcp.New(opts...)
	}
	if err != nil {
		t.Fatal(err)
	}
	opts := []swim.Option{swim.WithBindAddr("127.0.0.1:0"), swim.WithPreset(swim.Fast)}
	if m.gossip != "" {
		opts = append(opts, swim.WithSeeds(m.gossip))
	}
	if m.key != nil {
		opts = append(opts, swim.WithKeys(m.key))
	}
	if m.segment != "" {
		opts = append(opts, swim.WithSegment(m.segment))
	}
	d, err := swim.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	n, err := runtime.New(runtime.WithID(id), runtime.WithTransport(tr), runtime.WithListen("127.0.0.1:0"), runtime.WithDiscovery(d), runtime.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		n.Shutdown(ctx)
	})
	return n, d
}

// quiet logs the test nodes' errors only: peers that the test stops are
// dialled again, and say so.
var quiet = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))

// named answers its own pattern, so a test sees which handler ran.
func named(p string) runtime.Handler {
	return func(context.Context, runtime.Request) (any, error) { return map[string]any{"pattern": p}, nil }
}

func (m *testMesh) register(id string, n *runtime.Node) error {
	add := func(ps ...string) error {
		for _, p := range ps {
			if err := n.Add(p, named(p)); err != nil {
				return err
			}
		}
		return nil
	}
	switch id {
	case "node-a":
		return mathsvc.Register(n)
	case "node-b":
		if err := add("a:1", "a:1,b:1", "role:x,cmd:*", "role:x,cmd:get"); err != nil {
			return err
		}
		if err := n.Add("role:echo", func(ctx context.Context, r runtime.Request) (any, error) {
			return map[string]any{"msg": r.Msg(), "trace": runtime.IncomingMetadata(ctx).Get("trace")}, nil
		}); err != nil {
			return err
		}
		return n.Add("role:slow", func(ctx context.Context, r runtime.Request) (any, error) {
			select {
			case m.slow <- struct{}{}:
			default:
			}
			<-ctx.Done()
			return nil, ctx.Err()
		})
	case "node-c":
		if err := mathsvc.Register(n); err != nil {
			return err
		}
		return add("a:*,b:2")
	}
	return nil
}

// flags are the mesh flags of a wizard run against m.
func (m *testMesh) flags() []string {
	f := []string{"--seeds", m.gossip, "--preset", "fast", "--timeout", "10s", "--transport", m.kind}
	if m.kind == "quic" {
		f = append(f, "--tls-insecure")
	}
	return f
}

// result is one wizard run.
type result struct {
	out, err string
	code     int
}

// wizard runs the command line args in-process, with stdin.
func wizard(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	code := run(ctx, args, &stdio{in: strings.NewReader(stdin), out: &out, err: &errb})
	return result{out.String(), errb.String(), code}
}

// run runs command cmd against m.
func (m *testMesh) run(t *testing.T, cmd string, args ...string) result {
	t.Helper()
	return wizard(t, "", append(append([]string{cmd}, m.flags()...), args...)...)
}

// mask replaces what changes from run to run: the nodes' addresses by
// their names, ids and gossip addresses, latencies.
func (m *testMesh) mask(s string) string {
	for i, n := range m.nodes {
		s = strings.ReplaceAll(s, n.Addr(), "ADDR_"+string(rune('A'+i)))
	}
	s = regexp.MustCompile(`\b[0-9a-f]{16}\b`).ReplaceAllString(s, "WIZARD_ID")
	s = regexp.MustCompile(`127\.0\.0\.1:\d+`).ReplaceAllString(s, "127.0.0.1:PORT")
	s = regexp.MustCompile(`latency [0-9.]+(µs|ms|s|ns)`).ReplaceAllString(s, "latency L")
	s = regexp.MustCompile(`\(devel\)|v\d+\.\d+\.\d+\S*`).ReplaceAllString(s, "VERSION")
	s = regexp.MustCompile(` {2,}`).ReplaceAllString(s, "  ")
	return sortIndented(s)
}

// sortIndented sorts each run of lines indented by two spaces: targets
// are listed by address, which differs from run to run.
func sortIndented(s string) string {
	lines := strings.Split(s, "\n")
	for i := 0; i < len(lines); {
		j := i
		for j < len(lines) && strings.HasPrefix(lines[j], "  ") && !strings.HasPrefix(lines[j], "  1. ") {
			j++
		}
		if j > i+1 {
			slices.Sort(lines[i:j])
		}
		i = max(j, i+1)
	}
	return strings.Join(lines, "\n")
}

// golden compares got with testdata/name.golden, or rewrites it with
// -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s (-want +got):\n%s", path, diff)
	}
}

// until polls cond until it holds, failing t after a generous bound.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond) // polling, not synchronisation
	}
}
