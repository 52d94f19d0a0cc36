package swim

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/memberlist"

	"github.com/wizardmesh/wizard/runtime/internal/testkit/leak"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testlog"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
)

func TestStartErrors(t *testing.T) {
	leak.Check(t)
	tests := []struct {
		name string
		opts []Option
		host *fakeHost
		want string
	}{
		{"short key", []Option{WithKeys([]byte("short"))}, nil, "primary key is 5 bytes"},
		{"short secondary key", []Option{WithKeys(make([]byte, 16), make([]byte, 15))}, nil, "secondary key 1 is 15 bytes"},
		{"long segment", []Option{WithSegment(strings.Repeat("s", 129))}, nil, "segment is 129 bytes, the limit is 128"},
		{"bind without port", []Option{WithBindAddr("127.0.0.1")}, nil, `bind address "127.0.0.1"`},
		{"bind to a name", []Option{WithBindAddr("localhost:0")}, nil, "the host must be an IP address"},
		{"advertise a name", []Option{WithAdvertiseAddr("example.com:7946")}, nil, "the host must be an IP address"},
		{"unknown preset", []Option{WithPreset(Preset(7))}, nil, "unknown preset Preset(7)"},
		{"nil option", []Option{nil}, nil, "nil option"},
		{"nil seed function", []Option{WithSeedFunc(nil)}, nil, "nil seed function"},
		{"bad memberlist config", []Option{WithMemberlistConfig(func(c *memberlist.Config) { c.ProbeInterval = 0 })}, nil, "ProbeInterval and GossipInterval must be positive"},
		{"rpc address too long", nil, newFakeHost("x", strings.Repeat("a", 251)+":7000"), "rpc address is 256 bytes, the limit is 255"},
		{"no node id", nil, newFakeHost("", "127.0.0.1:1"), "the node has no id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := New(append([]Option{WithBindAddr("127.0.0.1:0"), WithPreset(Fast)}, tt.opts...)...)
			h := tt.host
			if h == nil {
				h = newFakeHost("x", "127.0.0.1:1")
			}
			err := d.Start(h)
			if err == nil {
				d.Close()
				t.Fatalf("Start succeeded, want an error containing %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "wizard: swim: ") && !errors.Is(err, errMeta) {
				t.Fatalf("Start: %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestLifecycle(t *testing.T) {
	leak.Check(t)
	d := New(WithBindAddr("127.0.0.1:0"), WithPreset(Fast))
	d.SelfChanged() // before Start: nothing to do, must not block
	d.SelfChanged()
	if got := d.GossipAddr(); got != "" {
		t.Errorf("GossipAddr before Start = %q", got)
	}
	h := newFakeHost("life", "127.0.0.1:1")
	if err := d.Start(h); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(d.GossipAddr(), "127.0.0.1:") || strings.HasSuffix(d.GossipAddr(), ":0") {
		t.Errorf("GossipAddr = %q", d.GossipAddr())
	}
	if err := d.Start(h); err == nil || !strings.Contains(err.Error(), "Start called twice") {
		t.Errorf("second Start: %v", err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	d.SelfChanged() // after Close: must not block
	if err := d.Start(h); err == nil || !strings.Contains(err.Error(), "Start after Close") {
		t.Errorf("Start after Close: %v", err)
	}
	if err := New().Close(); err != nil {
		t.Errorf("Close without Start: %v", err)
	}
}

// TestReannounce: a node's new digest is announced; one too long for the
// meta is logged and the members keep the last good meta.
func TestReannounce(t *testing.T) {
	leak.Check(t)
	var log testlog.Buffer
	d := New(WithBindAddr("127.0.0.1:0"), WithPreset(Fast), WithLogger(log.Logger()))
	h := newFakeHost("re", "0.0.0.0:7000")
	if err := d.Start(h); err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	m, err := decodeMeta(d.Meta())
	if err != nil {
		t.Fatal(err)
	}
	want := meta{Protocol: protocolVersion, Addr: "127.0.0.1:7000", Transport: "tcp", Digest: "d-re"}
	if diff := cmp.Diff(want, m); diff != "" {
		t.Errorf("meta (-want +got):\n%s", diff)
	}

	h.setDigest(strings.Repeat("x", 65))
	d.SelfChanged()
	testwait.Until(t, "no log line for the digest", func() bool { return strings.Contains(log.String(), "cannot announce the node's new state") })
	if m, _ := decodeMeta(d.Meta()); m.Digest != "d-re" {
		t.Errorf("digest after a failed announcement = %q", m.Digest)
	}

	h.setDigest("d-re2")
	d.SelfChanged()
	testwait.Until(t, "the new digest was not announced", func() bool {
		m, _ := decodeMeta(d.Meta())
		return m.Digest == "d-re2"
	})
	// memberlist holds the new meta for this node too.
	testwait.Until(t, "memberlist does not hold the new meta", func() bool {
		return bytes.Equal(d.ml.LocalNode().Meta, d.Meta())
	})
}

func TestResolveSeeds(t *testing.T) {
	d := New(WithBindAddr("127.0.0.1:7000"),
		WithSeeds("127.0.0.1:7000", "127.0.0.2", "[::1]:5", "127.0.0.2:7000", "127.0.0.3:bad"),
		WithSeedFunc(func(ctx context.Context) ([]string, error) { return []string{"10.0.0.1:1"}, errors.New("partly down") }),
	)
	d.gossipAddr = "127.0.0.1:7000"
	addrs, self, err := d.resolveSeeds(t.Context())
	if diff := cmp.Diff([]string{"127.0.0.2:7000", "[::1]:5", "10.0.0.1:1"}, addrs); diff != "" {
		t.Errorf("addrs (-want +got):\n%s", diff)
	}
	if !self {
		t.Error("self not seen among the seeds")
	}
	if err == nil || !strings.Contains(err.Error(), "partly down") || !strings.Contains(err.Error(), `seed "127.0.0.3:bad": bad port`) {
		t.Errorf("err = %v", err)
	}
	if got := New().defaultPort(); got != "7946" {
		t.Errorf("default port without a bind port = %s", got)
	}
}

// TestOnlySelf: seeds that name only this node make it the first of its
// cluster: joining stops after one attempt.
func TestOnlySelf(t *testing.T) {
	leak.Check(t)
	d := New(WithBindAddr("127.0.0.1:0"), WithPreset(Fast))
	d.cfg.seedFuncs = append(d.cfg.seedFuncs, func(context.Context) ([]string, error) { return []string{d.GossipAddr()}, nil })
	if err := d.Start(newFakeHost("alone", "127.0.0.1:1")); err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	done, err := d.join(t.Context())
	if !done || err != nil {
		t.Errorf("join = %v, %v; want done", done, err)
	}
}
