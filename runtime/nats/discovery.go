package nats

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	natsgo "github.com/nats-io/nats.go"

	"github.com/wizardmesh/wizard/runtime/discovery"
	"github.com/wizardmesh/wizard/runtime/internal/ratelog"
)

// Discovery finds nodes through the broker, for meshes without gossip:
// each node announces itself (id, run, address, transport, the digest of
// its pattern set) on a subject every heartbeat and at once when its
// patterns change; a node that joins asks every node to announce itself,
// so that it learns the mesh at once; a node that leaves says so, and one
// not heard from for the dead-node timeout is dropped. The runtime pulls
// a new node's catalog over the transport as usual. When the broker
// connection comes back after a loss, the node asks and announces again. Create it with
// [NewDiscovery]; it serves one node.
//
// Whoever may publish on the subject may announce a node: give only the
// mesh's nodes that permission (see the package documentation, Trust).
// An announcement only says where to dial: the runtime routes a peer's
// patterns once the node there states them itself, over its own
// connection.
type Discovery struct {
	t         *Transport
	subject   string
	interval  time.Duration
	deadAfter time.Duration
	maxPeers  int

	mu       sync.Mutex
	b        *broker
	host     discovery.Host
	sub      *natsgo.Subscription
	ms       members
	started  bool
	closed   bool
	announce chan struct{}
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	log      *slog.Logger
	logh     *ratelog.Handler
}

var (
	_ discovery.Discovery     = (*Discovery)(nil)
	_ discovery.SelfAnnouncer = (*Discovery)(nil)
)

// DiscoveryOption configures a [Discovery] in [NewDiscovery].
type DiscoveryOption interface{ apply(*Discovery) error }

type discoveryOptionFunc func(*Discovery) error

func (f discoveryOptionFunc) apply(d *Discovery) error { return f(d) }

// WithAnnounceSubject sets the subject nodes announce themselves on:
// "wizard.discovery" by default. Meshes that share a broker and must not
// see each other use subjects of their own. [NewDiscovery] fails on a
// subject that is not literal.
func WithAnnounceSubject(s string) DiscoveryOption {
	return discoveryOptionFunc(func(d *Discovery) error {
		if err := checkSubject(s); err != nil {
			return fmt.Errorf("WithAnnounceSubject(%q): %v", s, err)
		}
		d.subject = s
		return nil
	})
}

// WithHeartbeat sets how often a node announces itself and after how
// long without an announcement the others drop it: 0 for the defaults
// (1s and 5s), else an interval of at least 10ms and a timeout of at
// least twice the interval.
func WithHeartbeat(interval, deadAfter time.Duration) DiscoveryOption {
	return discoveryOptionFunc(func(d *Discovery) error {
		iv, dead := interval, deadAfter
		if iv == 0 {
			iv = defaultHeartbeat
		}
		if dead == 0 {
			dead = max(defaultDeadAfter, 2*iv)
		}
		switch {
		case iv < 10*time.Millisecond:
			return fmt.Errorf("WithHeartbeat(%v, %v): want an interval of 0 for the default (%v) or at least 10ms", interval, deadAfter, defaultHeartbeat)
		case dead < 2*iv:
			return fmt.Errorf("WithHeartbeat(%v, %v): want a timeout of 0 for the default (%v) or at least twice the interval", interval, deadAfter, defaultDeadAfter)
		}
		d.interval, d.deadAfter = iv, dead
		return nil
	})
}

// WithMaxPeers bounds how many nodes a Discovery tracks: 0 for the
// default (4096), else at least 1. Announcements of nodes beyond it are
// ignored until a tracked node leaves.
func WithMaxPeers(n int) DiscoveryOption {
	return discoveryOptionFunc(func(d *Discovery) error {
		if n < 0 {
			return fmt.Errorf("WithMaxPeers(%d): want 0 for the default (4096) or at least 1", n)
		}
		if n > 0 {
			d.maxPeers = n
		}
		return nil
	})
}

// The discovery defaults.
const (
	defaultAnnounceSubject = "wizard.discovery"
	defaultHeartbeat       = time.Second
	defaultDeadAfter       = 5 * time.Second
)

// NewDiscovery returns a discovery over t's broker connection (a node
// using it need not use t as its transport, but usually does). It fails
// on a nil transport or option and on an option's invalid argument.
func NewDiscovery(t *Transport, opts ...DiscoveryOption) (*Discovery, error) {
	if t == nil {
		return nil, errors.New("wizard: nats: NewDiscovery(nil): no transport")
	}
	d := &Discovery{t: t, subject: defaultAnnounceSubject, interval: defaultHeartbeat, deadAfter: defaultDeadAfter, maxPeers: 4096, announce: make(chan struct{}, 1)}
	for i, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("wizard: nats: discovery option %d of %d is nil", i+1, len(opts))
		}
		if err := o.apply(d); err != nil {
			return nil, fmt.Errorf("wizard: nats: %w", err)
		}
	}
	d.log = t.log
	return d, nil
}

// Start connects to the broker (if the transport has not), listens for
// announcements, asks the mesh to announce itself and announces the node
// (unless it listens nowhere: a node that only calls learns the mesh
// without being announced).
func (d *Discovery) Start(host discovery.Host) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case d.closed:
		return errors.New("wizard: nats: discovery Start after Close")
	case d.started:
		return errors.New("wizard: nats: a Discovery serves one node: Start called twice")
	}
	self := host.Self()
	if err := checkAnnounced(self); err != nil {
		return fmt.Errorf("wizard: nats: discovery: %w", err)
	}
	b, err := d.t.acquire()
	if err != nil {
		return fmt.Errorf("wizard: nats: discovery: %w", err)
	}
	d.b, d.host, d.started = b, host, true
	d.ms = members{deadAfter: d.deadAfter, max: d.maxPeers, m: map[string]*member{}}
	if d.log.Handler() != slog.DiscardHandler {
		d.logh = ratelog.NewHandler(d.log.Handler())
		d.log = slog.New(d.logh)
	}
	since := b.nc.LastError()
	d.sub, err = b.nc.Subscribe(d.subject, d.onMessage)
	if err != nil {
		d.t.release(b)
		return fmt.Errorf("wizard: nats: discovery: subscribe to %s: %w", d.subject, err)
	}
	// The broker has the subscription before the query goes: the
	// answers reach this node.
	if err := d.flushed(since, opSubscribe); err != nil {
		_ = d.sub.Unsubscribe()
		d.t.release(b)
		return fmt.Errorf("wizard: nats: discovery: subscribe to %s: %w", d.subject, err)
	}
	since = b.nc.LastError()
	d.publish(announcement{Version: 1, Op: "query"})
	if err := d.flushed(since, opPublish); err != nil {
		_ = d.sub.Unsubscribe()
		d.t.release(b)
		return fmt.Errorf("wizard: nats: discovery: publish to %s: %w", d.subject, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	d.cancel = cancel
	d.announceSelf()
	d.wg.Add(1)
	go d.run(ctx)
	b.mu.Lock()
	b.discoveries[d] = struct{}{}
	b.mu.Unlock()
	return nil
}

// rejoin asks the mesh to announce itself and announces the node, once
// the broker connection is back: nodes that joined, or changed, while it
// was away are heard of at once, not at their next heartbeat.
func (d *Discovery) rejoin() {
	d.mu.Lock()
	closed := d.closed
	d.mu.Unlock()
	if closed {
		return
	}
	d.publish(announcement{Version: 1, Op: "query"})
	d.SelfChanged()
}

// flushed flushes the broker connection and returns the broker's refusal
// of op on the announcement subject since the error since, if any: a
// node that may not hear or make announcements fails to start.
func (d *Discovery) flushed(since error, op string) error {
	ctx, cancel := context.WithTimeout(context.Background(), dialTimeout)
	defer cancel()
	return d.b.checked(ctx, since, op, d.subject)
}

// checkAnnounced checks that the node can be announced.
func checkAnnounced(p discovery.Peer) error {
	switch {
	case len(p.Addr) > maxSubject:
		return fmt.Errorf("the node's address %q is over %d bytes", p.Addr, maxSubject)
	case len(p.Digest) > maxDigest:
		return fmt.Errorf("the node's digest is over %d bytes", maxDigest)
	}
	return nil
}

// SelfChanged announces the node again at once (its patterns changed).
func (d *Discovery) SelfChanged() {
	select {
	case d.announce <- struct{}{}:
	default:
	}
}

// run announces the node every heartbeat and on SelfChanged, and drops
// the nodes not heard from for the timeout.
func (d *Discovery) run(ctx context.Context) {
	defer d.wg.Done()
	tick := time.NewTicker(d.interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.announce:
			d.announceSelf()
		case now := <-tick.C:
			d.announceSelf()
			d.mu.Lock()
			dead := d.ms.expire(now)
			d.mu.Unlock()
			for _, a := range dead {
				d.log.Info("wizard: nats: discovery: node not heard from, dropped", "id", a.ID, "addr", a.Addr, "after", d.deadAfter)
				d.host.PeerDown(a.peer())
			}
		}
	}
}

// announceSelf publishes the node's heartbeat; a node that does not
// listen (a caller only) is not announced.
func (d *Discovery) announceSelf() {
	s := d.host.Self()
	if s.Addr == "" {
		return
	}
	d.publish(announcement{Version: 1, Op: "up", ID: s.ID, Instance: s.Instance, Addr: s.Addr, Transport: s.Transport, Digest: s.Digest})
}

func (d *Discovery) publish(a announcement) {
	data, _ := json.Marshal(a) // strings and an int: it cannot fail
	if err := d.b.nc.Publish(d.subject, data); err != nil {
		d.log.Debug("wizard: nats: discovery: announcement not sent", "err", err)
	}
}

// onMessage takes an announcement. A malformed one is dropped with a
// rate-limited record.
func (d *Discovery) onMessage(m *natsgo.Msg) {
	a, err := decodeAnnouncement(m.Data)
	if err != nil {
		d.log.Warn("wizard: nats: discovery: malformed announcement dropped", "subject", m.Subject, "err", err.Error())
		return
	}
	self := d.host.Self()
	if a.Op == "query" {
		d.SelfChanged() // answer with a heartbeat
		return
	}
	if a.Addr == self.Addr || a.Instance != "" && a.Instance == self.Instance {
		return // its own
	}
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return
	}
	var changed bool
	var gone announcement
	if a.Op == "up" {
		changed = d.ms.up(a, time.Now())
	} else {
		gone, changed = d.ms.down(a)
	}
	d.mu.Unlock()
	switch {
	case !changed:
	case a.Op == "up":
		d.host.PeerUp(a.peer())
	default:
		d.host.PeerDown(gone.peer())
	}
}

// Close says the node leaves, stops listening and announcing, and gives
// back the broker connection.
func (d *Discovery) Close() error {
	d.mu.Lock()
	if d.closed || !d.started {
		d.closed = true
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	d.mu.Unlock()
	d.b.mu.Lock()
	delete(d.b.discoveries, d)
	d.b.mu.Unlock()
	d.cancel()
	d.wg.Wait()
	if s := d.host.Self(); s.Addr != "" {
		d.publish(announcement{Version: 1, Op: "down", ID: s.ID, Instance: s.Instance, Addr: s.Addr, Transport: s.Transport})
	}
	_ = d.sub.Unsubscribe()
	d.t.release(d.b)
	if d.logh != nil {
		d.logh.Close()
	}
	return nil
}
