package nats_test

import (
	"context"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/natstest"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testlog"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/transporttest"
	"github.com/wizardmesh/wizard/runtime/nats"
)

// restartHold is how long a caller must keep reaching the node once the
// broker is back: past the dead-node timeout (5s) and the time a caller
// stranded by a restart used to work on (7-10s). WIZARD_NATS_SOAK=1
// holds for a minute.
func restartHold() time.Duration {
	if os.Getenv("WIZARD_NATS_SOAK") == "1" {
		return time.Minute
	}
	return 12 * time.Second
}

// defaultsNode starts a node of the brokers at urls with the transport's
// and the discovery's default settings, listening on a subject of its
// own when listen is set.
func defaultsNode(t *testing.T, log *testlog.Buffer, listen bool, urls ...string) *runtime.Node {
	t.Helper()
	tr, err := nats.New(nats.WithURL(urls...), nats.WithLogger(log.Logger()))
	if err != nil {
		t.Fatal(err)
	}
	d, err := nats.NewDiscovery(tr)
	if err != nil {
		t.Fatal(err)
	}
	opts := []runtime.Option{runtime.WithTransport(tr), runtime.WithDiscovery(d), runtime.WithLogger(log.Logger())}
	if listen {
		opts = append(opts, runtime.WithListen(":0"))
	}
	return transporttest.NewNode(t, opts...)
}

// keepsReaching fails t unless cl, once it reaches role:work again,
// reaches it with every call for restartHold.
func keepsReaching(t *testing.T, cl *runtime.Node, log *testlog.Buffer) {
	t.Helper()
	call := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		_, err := cl.Act(ctx, "role:work", nil, runtime.WaitForReady())
		return err
	}
	back := time.Now()
	testwait.Until(t, "the caller reaches the node once the broker is back", func() bool { return call() == nil })
	t.Logf("the caller reached the node again after %v", time.Since(back).Round(time.Millisecond))
	start, hold := time.Now(), restartHold()
	for n := 0; time.Since(start) < hold; n++ {
		if err := call(); err != nil {
			t.Fatalf("call %d, %v after the caller reached the node again: %v\nlog:\n%s", n, time.Since(start).Round(time.Millisecond), err, log)
		}
		time.Sleep(50 * time.Millisecond) // pacing the calls, not synchronisation
	}
}

// TestBrokerProcessRestart: a nats-server process is stopped and started
// again on the same port while a node and a caller that found it by NATS
// discovery (default settings: heartbeats, dead-node timeout, reconnect)
// run; the caller reaches the node again and keeps reaching it, past the
// dead-node timeout: the caller's failed dials while the broker was away
// leave the broker connection its discovery listens on open.
func TestBrokerProcessRestart(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) {
			p := natstest.StartProcess(t, "")
			log := &testlog.Buffer{}
			srv := defaultsNode(t, log, true, p.URL())
			transporttest.MustAdd(t, srv, "role:work", func(ctx context.Context, r runtime.Request) (any, error) { return "done", nil })
			cl := defaultsNode(t, log, false, p.URL())
			transporttest.WaitRoutable(t, cl, "role:work")
			p.Kill(sig)
			p.Restart()
			keepsReaching(t, cl, log)
		})
	}
}
