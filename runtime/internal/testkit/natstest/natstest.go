// Package natstest starts NATS brokers for tests: on 127.0.0.1, a random
// port, shut down when the test ends; a broker can be stopped and started
// again on the same port. [Start] embeds one in the test process;
// [StartProcess] runs nats-server as a process of its own (built from
// the module the go.mod pins), with a configuration file, for what only a
// real process shows: a kill, a restart, a cluster, a reload.
package natstest

import (
	"net"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Broker is an embedded nats-server.
type Broker struct {
	t    testing.TB
	opts server.Options

	mu sync.Mutex
	s  *server.Server
}

// Start starts a broker on 127.0.0.1 with a random port, shut down when
// t ends. opt, if given, edits the options first (authentication, say).
func Start(t testing.TB, opt ...func(*server.Options)) *Broker {
	t.Helper()
	b := &Broker{t: t, opts: server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true}}
	for _, o := range opt {
		o(&b.opts)
	}
	b.Restart()
	b.opts.Port = b.s.Addr().(*net.TCPAddr).Port // the same port on a restart
	t.Cleanup(b.Stop)
	return b
}

// URL returns the broker's client URL, "nats://127.0.0.1:<port>".
func (b *Broker) URL() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.s.ClientURL()
}

// Stop shuts the broker down and waits until it is gone.
func (b *Broker) Stop() {
	b.mu.Lock()
	s := b.s
	b.mu.Unlock()
	s.Shutdown()
	s.WaitForShutdown()
}

// Restart starts the broker (again, on the same port after the first
// start), failing the test unless it takes connections within 10s.
func (b *Broker) Restart() {
	b.t.Helper()
	opts := b.opts
	s, err := server.NewServer(&opts)
	if err != nil {
		b.t.Fatalf("natstest: %v", err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		b.t.Fatal("natstest: the broker did not start within 10s")
	}
	b.mu.Lock()
	b.s = s
	b.mu.Unlock()
}
