package swim

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/memberlist"

	"github.com/wizardmesh/wizard/runtime/internal/testkit/leak"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testlog"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
)

// mustNew returns a Discovery made with opts, which must be valid.
func mustNew(t testing.TB, opts ...Option) *Discovery {
	t.Helper()
	d, err := New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestNew: New accepts every valid option and refuses each invalid one
// with an error that starts with the package and names the option and
// its argument.
func TestNew(t *testing.T) {
	key := make([]byte, 16)
	seeds := func(context.Context) ([]string, error) { return nil, nil }
	good := []struct {
		name string
		opts []Option
	}{
		{"none", nil},
		{"bind", []Option{WithBindAddr("127.0.0.1:0")}},
		{"bind every interface", []Option{WithBindAddr(":7946")}},
		{"bind IPv6", []Option{WithBindAddr("[::1]:7946")}},
		{"advertise", []Option{WithAdvertiseAddr("10.0.0.5:7946")}},
		{"advertise without a port", []Option{WithAdvertiseAddr("10.0.0.5")}},
		{"seeds", []Option{WithSeeds("10.0.0.5:7946", "10.0.0.6", "seed.example", "[::1]:5", "::1")}},
		{"DNS seeds", []Option{WithDNSSeeds("_gossip._udp.wizard.default.svc.cluster.local", "seeds.example", "seeds.example:7000")}},
		{"seed function", []Option{WithSeedFunc(seeds)}},
		{"nil resolver", []Option{WithResolver(nil)}},
		{"longest segment", []Option{WithSegment(strings.Repeat("s", 128))}},
		{"keys", []Option{WithKeys(key, make([]byte, 24), make([]byte, 32))}},
		{"presets", []Option{WithPreset(LAN), WithPreset(Fast)}},
		{"memberlist config", []Option{WithMemberlistConfig(func(*memberlist.Config) {})}},
		{"nil logger", []Option{WithLogger(nil)}},
		{"insecure", []Option{WithInsecure()}},
		{"reconnect", []Option{WithReconnect(10*time.Millisecond, time.Hour)}},
		{"preset's reconnect", []Option{WithReconnect(0, 0)}},
		{"no reconnect", []Option{WithReconnect(-1, 0)}},
	}
	for _, tt := range good {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := New(tt.opts...); err != nil {
				t.Fatalf("New: %v", err)
			}
		})
	}

	bad := []struct {
		name string
		opts []Option
		want string
	}{
		{"nil option", []Option{WithPreset(Fast), nil}, "wizard: swim: option 2 of 2 is nil"},
		{"bind without port", []Option{WithBindAddr("127.0.0.1")}, `wizard: swim: WithBindAddr("127.0.0.1"): want "ip:port" (an empty ip binds every interface, port 0 picks a free port)`},
		{"bind to a bad port", []Option{WithBindAddr("127.0.0.1:70000")}, `wizard: swim: WithBindAddr("127.0.0.1:70000"): bad port "70000"`},
		{"bind to a name", []Option{WithBindAddr("localhost:0")}, `wizard: swim: WithBindAddr("localhost:0"): the host must be an IP address`},
		{"advertise a name", []Option{WithAdvertiseAddr("example.com:7946")}, `wizard: swim: WithAdvertiseAddr("example.com:7946"): the host must be an IP address`},
		{"advertise a bad port", []Option{WithAdvertiseAddr("10.0.0.5:x")}, `wizard: swim: WithAdvertiseAddr("10.0.0.5:x"): bad port "x"`},
		{"seed with a bad port", []Option{WithSeeds("10.0.0.5:7946", "10.0.0.6:bad")}, `wizard: swim: WithSeeds: seed "10.0.0.6:bad": bad port`},
		{"seed without a host", []Option{WithSeeds(":7946")}, `wizard: swim: WithSeeds: seed ":7946": no host`},
		{"empty DNS seed", []Option{WithDNSSeeds("")}, `wizard: swim: WithDNSSeeds: name "": no host`},
		{"DNS seed with a bad port", []Option{WithDNSSeeds("seeds.example:http")}, `wizard: swim: WithDNSSeeds: name "seeds.example:http": bad port`},
		{"nil seed function", []Option{WithSeedFunc(nil)}, "wizard: swim: WithSeedFunc(nil): no function"},
		{"long segment", []Option{WithSegment(strings.Repeat("s", 129))}, "wizard: swim: WithSegment: the name is 129 bytes, the limit is 128"},
		{"short key", []Option{WithKeys([]byte("short"))}, "wizard: swim: WithKeys: the primary key is 5 bytes; a key is 16, 24 or 32 bytes (AES-128, -192, -256)"},
		{"short secondary key", []Option{WithKeys(key, make([]byte, 15))}, "wizard: swim: WithKeys: secondary key 1 is 15 bytes; a key is 16, 24 or 32 bytes (AES-128, -192, -256)"},
		{"unknown preset", []Option{WithPreset(Preset(7))}, "wizard: swim: WithPreset(Preset(7)): want LAN or Fast"},
		{"nil memberlist function", []Option{WithMemberlistConfig(nil)}, "wizard: swim: WithMemberlistConfig(nil): no function"},
		{"reconnect too often", []Option{WithReconnect(time.Millisecond, 0)}, "wizard: swim: WithReconnect(1ms, 0s): an interval under 10ms would keep gossip busy joining"},
		{"negative reconnect timeout", []Option{WithReconnect(time.Second, -time.Second)}, "wizard: swim: WithReconnect(1s, -1s): a negative timeout"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			d, err := New(tt.opts...)
			if err == nil {
				t.Fatalf("New = %v, nil; want an error", d)
			}
			if diff := cmp.Diff(tt.want, err.Error()); diff != "" {
				t.Errorf("New's error (-want +got):\n%s", diff)
			}
		})
	}
}

// TestStartErrors: what New cannot check fails Start, with the package's
// prefix.
func TestStartErrors(t *testing.T) {
	leak.Check(t)
	tests := []struct {
		name string
		opts []Option
		host *fakeHost
		want string
	}{
		{"bad memberlist config", []Option{WithMemberlistConfig(func(c *memberlist.Config) { c.ProbeInterval = 0 })}, nil, "wizard: swim: memberlist config: ProbeInterval and GossipInterval must be positive"},
		{"rpc address too long", nil, newFakeHost("x", strings.Repeat("a", 251)+":7000"), "wizard: swim: bad node meta: rpc address is 256 bytes, the limit is 255"},
		{"no node id", nil, newFakeHost("", "127.0.0.1:1"), "wizard: swim: the node has no id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := mustNew(t, append([]Option{WithBindAddr("127.0.0.1:0"), WithPreset(Fast)}, tt.opts...)...)
			h := tt.host
			if h == nil {
				h = newFakeHost("x", "127.0.0.1:1")
			}
			err := d.Start(h)
			if err == nil {
				d.Close()
				t.Fatalf("Start succeeded, want %q", tt.want)
			}
			if diff := cmp.Diff(tt.want, err.Error()); diff != "" {
				t.Errorf("Start's error (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("port taken", func(t *testing.T) {
		first := mustNew(t, WithBindAddr("127.0.0.1:0"), WithPreset(Fast))
		if err := first.Start(newFakeHost("first", "127.0.0.1:1")); err != nil {
			t.Fatal(err)
		}
		defer first.Close()
		d := mustNew(t, WithBindAddr(first.GossipAddr()), WithPreset(Fast))
		err := d.Start(newFakeHost("second", "127.0.0.1:1"))
		if err == nil {
			d.Close()
			t.Fatal("Start on a taken port succeeded")
		}
		if want := "wizard: swim: listen for gossip on " + first.GossipAddr() + ": "; !strings.HasPrefix(err.Error(), want) {
			t.Errorf("Start = %v, want %q and the reason", err, want)
		}
	})
}

func TestLifecycle(t *testing.T) {
	leak.Check(t)
	d := mustNew(t, WithBindAddr("127.0.0.1:0"), WithPreset(Fast))
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
	if err := mustNew(t).Close(); err != nil {
		t.Errorf("Close without Start: %v", err)
	}
}

// TestReannounce: a node's new digest is announced; one too long for the
// meta is logged and the members keep the last good meta.
func TestReannounce(t *testing.T) {
	leak.Check(t)
	var log testlog.Buffer
	d := mustNew(t, WithBindAddr("127.0.0.1:0"), WithPreset(Fast), WithLogger(log.Logger()))
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
	d := mustNew(t, WithBindAddr("127.0.0.1:7000"),
		WithSeeds("127.0.0.1:7000", "127.0.0.2", "[::1]:5", "127.0.0.2:7000"),
		WithSeedFunc(func(ctx context.Context) ([]string, error) {
			return []string{"10.0.0.1:1", "127.0.0.3:bad"}, errors.New("partly down") // checked at each join
		}),
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
	if got := mustNew(t).defaultPort(); got != "7946" {
		t.Errorf("default port without a bind port = %s", got)
	}
}

// TestOnlySelf: seeds that name only this node make it the first of its
// cluster: joining stops after one attempt.
func TestOnlySelf(t *testing.T) {
	leak.Check(t)
	d := mustNew(t, WithBindAddr("127.0.0.1:0"), WithPreset(Fast))
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
