package nats_test

import (
	"context"
	"fmt"
	"os"
	"strings"
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
// broker is back: past the dead-node timeout deadAfter, after which a
// stranded caller would drop the node; WIZARD_NATS_SOAK=1 holds for a
// minute.
func restartHold(deadAfter time.Duration) time.Duration {
	if os.Getenv("WIZARD_NATS_SOAK") == "1" {
		return time.Minute
	}
	return 3*deadAfter + time.Second
}

// quickHeartbeat is the discovery's heartbeat of the tests that need not
// run with the defaults: a stranded caller fails them sooner.
var quickHeartbeat = nats.WithHeartbeat(100*time.Millisecond, time.Second)

// defaultsNode starts a node of the brokers at urls with the transport's
// default settings and the discovery's but for dopts, listening on a
// subject of its own when listen is set.
func defaultsNode(t *testing.T, log *testlog.Buffer, listen bool, urls []string, dopts ...nats.DiscoveryOption) *runtime.Node {
	t.Helper()
	tr, err := nats.New(nats.WithURL(urls...), nats.WithLogger(log.Logger()))
	if err != nil {
		t.Fatal(err)
	}
	d, err := nats.NewDiscovery(tr, dopts...)
	if err != nil {
		t.Fatal(err)
	}
	opts := []runtime.Option{runtime.WithTransport(tr), runtime.WithDiscovery(d), runtime.WithLogger(log.Logger())}
	if listen {
		opts = append(opts, runtime.WithListen(":0"))
	}
	return transporttest.NewNode(t, opts...)
}

// callWork calls role:work, waiting for a target for up to 3s.
func callWork(cl *runtime.Node) error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err := cl.Act(ctx, "role:work", nil, runtime.WaitForReady())
	return err
}

// reaches waits until cl reaches role:work.
func reaches(t *testing.T, cl *runtime.Node) {
	t.Helper()
	back := time.Now()
	testwait.Until(t, "the caller reaches the node once the broker is back", func() bool { return callWork(cl) == nil })
	t.Logf("the caller reached the node again after %v", time.Since(back).Round(time.Millisecond))
}

// keepsReaching fails t unless cl, once it reaches role:work again,
// reaches it with every call for the restartHold of deadAfter.
func keepsReaching(t *testing.T, cl *runtime.Node, log *testlog.Buffer, deadAfter time.Duration) {
	t.Helper()
	reaches(t, cl)
	start, hold := time.Now(), restartHold(deadAfter)
	for n := 0; time.Since(start) < hold; n++ {
		if err := callWork(cl); err != nil {
			t.Fatalf("call %d, %v after the caller reached the node again: %v\nlog:\n%s", n, time.Since(start).Round(time.Millisecond), err, log)
		}
		time.Sleep(50 * time.Millisecond) // pacing the calls, not synchronisation
	}
}

// TestBrokerProcessRestart: a nats-server process is stopped and started
// again on the same port while a node and a caller that found it by NATS
// discovery run; the caller reaches the node again and keeps reaching it
// past the dead-node timeout (the caller's failed dials while the broker
// was away must leave open the broker connection its discovery listens
// on). Stopped, the broker runs with the default settings throughout
// (heartbeats, dead-node timeout, reconnect); killed, with quick
// heartbeats.
func TestBrokerProcessRestart(t *testing.T) {
	for _, tc := range []struct {
		sig       syscall.Signal
		deadAfter time.Duration
		dopts     []nats.DiscoveryOption
	}{
		{syscall.SIGTERM, 5 * time.Second, nil},
		{syscall.SIGKILL, time.Second, []nats.DiscoveryOption{quickHeartbeat}},
	} {
		t.Run(tc.sig.String(), func(t *testing.T) {
			p := natstest.StartProcess(t, "")
			log := &testlog.Buffer{}
			srv := defaultsNode(t, log, true, []string{p.URL()}, tc.dopts...)
			transporttest.MustAdd(t, srv, "role:work", func(ctx context.Context, r runtime.Request) (any, error) { return "done", nil })
			cl := defaultsNode(t, log, false, []string{p.URL()}, tc.dopts...)
			transporttest.WaitRoutable(t, cl, "role:work")
			p.Kill(tc.sig)
			p.Restart()
			keepsReaching(t, cl, log, tc.deadAfter)
		})
	}
}

// TestBrokerClusterRestart: the servers of a 3-server nats-server cluster
// are killed and started again one after another, then all at once,
// while a node and a caller, each given every server's URL, run with the
// default settings but quick heartbeats; the caller reaches the node
// after each restart and keeps reaching it past the dead-node timeout
// after the last.
func TestBrokerClusterRestart(t *testing.T) {
	var ports, routePorts [3]int
	for i := range ports {
		ports[i], routePorts[i] = natstest.FreePort(t), natstest.FreePort(t)
	}
	var routes []string
	for _, rp := range routePorts {
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", rp))
	}
	var servers []*natstest.Process
	var urls []string
	for i, port := range ports {
		p := natstest.StartProcessOn(t, port, "", "--cluster_name", "wizard", "--cluster", routes[i], "--routes", strings.Join(routes, ","))
		servers = append(servers, p)
		urls = append(urls, p.URL())
	}
	log := &testlog.Buffer{}
	srv := defaultsNode(t, log, true, urls, quickHeartbeat)
	transporttest.MustAdd(t, srv, "role:work", func(ctx context.Context, r runtime.Request) (any, error) { return "done", nil })
	cl := defaultsNode(t, log, false, urls, quickHeartbeat)
	transporttest.WaitRoutable(t, cl, "role:work")
	for _, p := range servers {
		p.Kill(syscall.SIGKILL)
		p.Restart()
		reaches(t, cl)
	}
	// The whole cluster at once: the nodes have no server to move to.
	for _, p := range servers {
		p.Kill(syscall.SIGKILL)
	}
	for _, p := range servers {
		p.Restart()
	}
	keepsReaching(t, cl, log, time.Second)
}
