package nats_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/natstest"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/transporttest"
	"github.com/wizardmesh/wizard/runtime/nats"
)

// TestNewRejects: New names the option that is wrong and why.
func TestNewRejects(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "none.creds")
	badSeed := filepath.Join(t.TempDir(), "bad.nk")
	if err := os.WriteFile(badSeed, []byte("not a seed"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		opts []nats.Option
		want string
	}{
		{"nil option", []nats.Option{nil}, "wizard: nats: option 1 of 1 is nil"},
		{"no URL", []nats.Option{nats.WithURL()}, "wizard: nats: WithURL(): no URL; leave the option out for nats://127.0.0.1:4222"},
		{"scheme", []nats.Option{nats.WithURL("http://x:4222")}, `wizard: nats: WithURL("http://x:4222"): scheme "http"; want nats, tls, ws or wss (nats://host:4222)`},
		{"no host", []nats.Option{nats.WithURL("nats://")}, `wizard: nats: WithURL("nats://"): no host (nats://host:4222)`},
		{"nil TLS", []nats.Option{nats.WithTLS(nil)}, "wizard: nats: WithTLS(nil): no configuration; leave the option out to connect without TLS"},
		{"credentials file", []nats.Option{nats.WithCredentials(missing)}, `wizard: nats: WithCredentials("` + missing + `"): stat ` + missing + `: no such file or directory`},
		{"bad seed", []nats.Option{nats.WithNKeySeed(badSeed)}, `wizard: nats: WithNKeySeed("` + badSeed + `"): `},
		{"empty token", []nats.Option{nats.WithToken("")}, `wizard: nats: WithToken(""): an empty token`},
		{"empty user", []nats.Option{nats.WithUserInfo("", "pw")}, "wizard: nats: WithUserInfo: an empty user name"},
		{"two auths", []nats.Option{nats.WithToken("t"), nats.WithUserInfo("u", "p")}, "wizard: nats: WithToken and WithUserInfo: choose one way to authenticate"},
		{"reconnect wait", []nats.Option{nats.WithReconnect(time.Millisecond, 0)}, "wizard: nats: WithReconnect(1ms, 0): want a wait of 0 for the default (2s) or at least 10ms"},
		{"reconnects", []nats.Option{nats.WithReconnect(0, -1)}, "wizard: nats: WithReconnect(0s, -1): want 0 attempts for no limit, or at least 1"},
		{"prefix wildcard", []nats.Option{nats.WithSubjectPrefix("wizard.*")}, `wizard: nats: WithSubjectPrefix("wizard.*"): a wildcard; want a literal subject`},
		{"prefix dots", []nats.Option{nats.WithSubjectPrefix("wizard..node")}, `wizard: nats: WithSubjectPrefix("wizard..node"): an empty token (two dots in a row, or a dot at an end)`},
		{"frame size", []nats.Option{nats.WithMaxFrameSize(3)}, "wizard: nats: WithMaxFrameSize(3): want 0 for the default (4 MiB) or 14 to 4294967295 bytes"},
		{"keep-alive", []nats.Option{nats.WithKeepAlive(time.Millisecond, 0)}, "wizard: nats: WithKeepAlive(1ms, 0s): the interval is below 10ms; want a negative interval for no pings, 0 for the default (15s) or at least 10ms"},
		{"serve timeout", []nats.Option{nats.WithServeTimeout(-1)}, "wizard: nats: WithServeTimeout(-1ns): want 0 for the default (30s) or at least 1ms"},
		{"max serving", []nats.Option{nats.WithMaxServing(-1)}, "wizard: nats: WithMaxServing(-1): want 0 for the default (4096) or at least 1"},
		{"nil NATS option", []nats.Option{nats.WithNATSOptions(nil)}, "wizard: nats: WithNATSOptions: option 1 of 1 is nil"},
		{"stream keep-alive", []nats.Option{nats.WithStreamKeepAlive(time.Millisecond, 0)}, "wizard: nats: WithStreamKeepAlive(1ms, 0s): want an interval that is negative (no pings), 0 for the default (1s) or at least 10ms, and a timeout of 0 for the default (2s) or at least 10ms"},
		{"stream keep-alive timeout", []nats.Option{nats.WithStreamKeepAlive(0, -1)}, "wizard: nats: WithStreamKeepAlive(0s, -1ns): want"},
		{"max streams", []nats.Option{nats.WithMaxStreams(-1)}, "wizard: nats: WithMaxStreams(-1): want 0 for the default (1024) or at least 1"},
		{"stream window", []nats.Option{nats.WithStreamWindow(1 << 10)}, "wizard: nats: WithStreamWindow(1024): want 0 for the default (262144) or 262144 to 1073741824 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := nats.New(tc.opts...)
			if err == nil || len(err.Error()) < len(tc.want) || err.Error()[:len(tc.want)] != tc.want {
				t.Errorf("New: %v\nwant an error starting %q", err, tc.want)
			}
		})
	}
}

// TestListenRejects: Listen takes a literal subject only.
func TestListenRejects(t *testing.T) {
	b := natstest.Start(t)
	tr := newTransport(t, b.URL())
	for _, addr := range []string{"wizard.*", "a..b", "a b", "wizard.>"} {
		if l, err := tr.Listen(addr, nil); err == nil {
			l.Close()
			t.Errorf("Listen(%q) succeeded", addr)
		}
	}
}

// TestAuth: a broker that wants a token or a user and password serves
// nodes that give them, and a transport without them fails to connect,
// with a call not sent.
func TestAuth(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(*server.Options)
		good  nats.Option
	}{
		{"token", func(o *server.Options) { o.Authorization = "s3cr3t" }, nats.WithToken("s3cr3t")},
		{"user", func(o *server.Options) { o.Username, o.Password = "node", "pw" }, nats.WithUserInfo("node", "pw")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := natstest.Start(t, tc.setup)
			srv := transporttest.NewServer(t, newTransport(t, b.URL(), tc.good))
			transporttest.MustAdd(t, srv, "role:auth", func(ctx context.Context, r runtime.Request) (any, error) { return "in", nil })
			cl := transporttest.NewClient(t, newTransport(t, b.URL(), tc.good), "role:auth", nil, srv.Addr())
			if res, err := cl.ActE(t.Context(), "role:auth", nil); err != nil || res.Value() != "in" {
				t.Fatalf("call = %v, %v", res.Value(), err)
			}
			_, err := newTransport(t, b.URL()).Dial(t.Context(), srv.Addr())
			if !errors.Is(err, runtime.ErrNotSent) {
				t.Errorf("dial without credentials: %v; want an error that matches ErrNotSent", err)
			}
		})
	}
}

// TestDialNobody: dialling a subject nobody listens on fails at once as
// not sent, saying so.
func TestDialNobody(t *testing.T) {
	b := natstest.Start(t)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	_, err := newTransport(t, b.URL()).Dial(ctx, "wizard.node.nobody")
	const want = "wizard: nats: dial wizard.node.nobody: call not sent: no node listens on the subject"
	if !errors.Is(err, runtime.ErrNotSent) || err.Error() != want {
		t.Errorf("Dial = %v; want %q, matching ErrNotSent", err, want)
	}
}

// TestBrokerDown: with no broker, a dial fails as not sent.
func TestBrokerDown(t *testing.T) {
	b := natstest.Start(t)
	url := b.URL()
	b.Stop()
	_, err := newTransport(t, url).Dial(t.Context(), "wizard.node.x")
	if !errors.Is(err, runtime.ErrNotSent) {
		t.Errorf("Dial = %v; want an error that matches ErrNotSent", err)
	}
}
