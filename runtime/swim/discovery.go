package swim

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/wizardmesh/wizard/runtime/discovery"
	"github.com/wizardmesh/wizard/runtime/internal/ratelog"
)

// Discovery finds the other nodes of a cluster by SWIM gossip
// (hashicorp/memberlist) and tells its node about them. Create it with
// [New] and hand it to runtime.WithDiscovery; the node starts and closes
// it. A Discovery serves one node, once.
type Discovery struct {
	cfg     config
	log     *slog.Logger
	keyring *memberlist.Keyring // nil without WithKeys

	// memberlistLog limits memberlist's warnings and errors, which other
	// hosts can cause at will.
	memberlistLog *ratelog.Limiter

	mu         sync.Mutex // guards started, closed and gossipAddr
	started    bool
	closed     bool
	gossipAddr string // advertised ip:port, set in Start

	// Set in Start before any goroutine of the Discovery starts, then
	// fixed.
	host     discovery.Host
	ml       *memberlist.Memberlist
	mlConfig *memberlist.Config
	tr       *transport // nil when WithMemberlistConfig brought another
	name     string     // this node's memberlist name: node id + "/" + instance
	gossipIP net.IP
	cancel   context.CancelFunc // ends the goroutines' context, at Close

	meta     atomic.Pointer[[]byte] // what NodeMeta hands memberlist; always valid
	announce chan struct{}          // SelfChanged's signal, capacity 1
	wg       sync.WaitGroup

	events eventQueue

	// Reconnecting (reconnect.go): the interval between reconnect
	// rounds (0 or less: none, and no seed re-joins), how long a failed
	// member is tried, and the failed members.
	reconnectEvery time.Duration
	reconnectFor   time.Duration
	failed         failures
	live           liveMembers // live members' gossip addresses, by name

	joinAttempts atomic.Int64 // for tests
}

var (
	_ discovery.Discovery     = (*Discovery)(nil)
	_ discovery.SelfAnnouncer = (*Discovery)(nil)
	_ discovery.Segmented     = (*Discovery)(nil)
)

// New returns a Discovery configured by opts. It fails on a nil option and
// on an option's invalid argument, with an error that names the option.
// What can only be known when the node starts it (binding the gossip
// port, the configuration [WithMemberlistConfig]'s functions leave, the
// node's id and address) is checked by [Discovery.Start]: runtime.New
// fails then.
func New(opts ...Option) (*Discovery, error) {
	d := &Discovery{announce: make(chan struct{}, 1)}
	d.failed.init()
	for i, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("wizard: swim: option %d of %d is nil", i+1, len(opts))
		}
		if err := o.apply(&d.cfg); err != nil {
			return nil, fmt.Errorf("wizard: swim: %w", err)
		}
	}
	d.log = d.cfg.logger
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	d.memberlistLog = ratelog.NewLimiter(d.log.Handler(), "wizard: swim: memberlist's warnings and errors")
	if d.cfg.insecure && len(d.cfg.keys) > 0 {
		return nil, errors.New("wizard: swim: WithInsecure and WithKeys: choose one (WithInsecure gossips in the clear)")
	}
	if d.cfg.resolver == nil {
		d.cfg.resolver = net.DefaultResolver
	}
	d.reconnectEvery, d.reconnectFor = d.cfg.preset.reconnect()
	if d.cfg.reconnectEvery != 0 {
		d.reconnectEvery = d.cfg.reconnectEvery
	}
	if d.cfg.reconnectFor != 0 {
		d.reconnectFor = d.cfg.reconnectFor
	}
	if keys := d.cfg.keys; len(keys) > 0 {
		kr, err := memberlist.NewKeyring(keys[1:], keys[0])
		if err != nil {
			return nil, fmt.Errorf("wizard: swim: WithKeys: %w", err)
		}
		d.keyring = kr
	}
	return d, nil
}

// splitBind parses a bind address, "host:port" (an empty host binds every
// interface).
func splitBind(addr string) (string, int, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, errors.New(`want "ip:port" (an empty ip binds every interface, port 0 picks a free port)`)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return "", 0, fmt.Errorf("bad port %q", port)
	}
	if host == "" {
		host = "0.0.0.0"
	}
	if net.ParseIP(host) == nil {
		return "", 0, errors.New("the host must be an IP address")
	}
	return host, int(p), nil
}

// splitAdvertise parses an advertise address, "ip:port" or "ip"; port 0
// means the bind port.
func splitAdvertise(addr string) (string, int, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		host, port = addr, "0"
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return "", 0, fmt.Errorf("bad port %q", port)
	}
	if net.ParseIP(host) == nil {
		return "", 0, errors.New("the host must be an IP address")
	}
	return host, int(p), nil
}

// Start joins the node to its cluster: it starts memberlist on the gossip
// address, then joins the seeds in the background. It implements
// discovery.Discovery; the node calls it.
func (d *Discovery) Start(host discovery.Host) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case d.closed:
		return errors.New("wizard: swim: Start after Close")
	case d.started:
		return errors.New("wizard: swim: a Discovery serves one node: Start called twice")
	}
	self := host.Self()
	if self.ID == "" {
		return errors.New("wizard: swim: the node has no id")
	}
	d.host = host
	// Fail before binding if the node's own meta cannot be announced.
	b, err := d.encodeSelf(self)
	if err != nil {
		return err
	}
	d.meta.Store(&b)

	// A name unique per run: memberlist refuses a second member under a
	// live member's name, so a restarted node needs a new one.
	boot := self.Instance
	if boot == "" || strings.ContainsRune(boot, '/') {
		var b [6]byte
		_, _ = rand.Read(b[:])
		boot = hex.EncodeToString(b[:])
	}
	d.name = self.ID + "/" + boot

	c, tr, err := d.memberlistConfig()
	if err != nil {
		return err
	}
	d.events.init()
	ml, err := memberlist.Create(c)
	if err != nil {
		if tr != nil {
			tr.Shutdown()
		}
		return fmt.Errorf("wizard: swim: start gossip on %s: %w", net.JoinHostPort(c.BindAddr, strconv.Itoa(c.BindPort)), err)
	}
	d.ml, d.mlConfig, d.tr, d.started = ml, c, tr, true
	ln := ml.LocalNode() // written in Create, on this goroutine
	d.gossipIP = ln.Addr
	d.gossipAddr = net.JoinHostPort(ln.Addr.String(), strconv.Itoa(int(ln.Port)))
	d.log.Info("wizard: swim: gossip started", "node", d.name, "addr", d.gossipAddr, "segment", d.cfg.segment, "preset", d.cfg.preset, "encrypted", d.keyring != nil)

	// The RPC address may need the advertised IP, known only now.
	d.reannounce()

	states, err := newStateReader(ml)
	if err != nil {
		d.log.Warn("wizard: swim: cannot read memberlist's member states; suspect members will not be reported, and members that left are reconnected to as if they had failed", "err", err)
	}
	d.failed.setVerify(states != nil)

	ctx, cancel := context.WithCancel(context.Background())
	d.cancel = cancel
	d.wg.Add(2)
	go d.runEvents(ctx)
	go d.runAnnouncer(ctx)
	if states != nil {
		d.wg.Add(1)
		go d.runSuspicionWatch(ctx, states)
	}
	if d.hasSeeds() {
		d.wg.Add(1)
		go d.runJoin(ctx)
	}
	if d.reconnectEvery > 0 {
		d.wg.Add(1)
		go d.runReconnect(ctx)
	}
	return nil
}

// memberlistConfig builds memberlist's configuration: the preset's
// timings, the options, then WithMemberlistConfig's functions.
func (d *Discovery) memberlistConfig() (*memberlist.Config, *transport, error) {
	c := memberlist.DefaultLANConfig()
	d.cfg.preset.apply(c)
	c.Name = d.name
	c.LogOutput = nil
	c.Logger = log.New(logWriter{l: d.log, limit: d.memberlistLog}, "", 0)
	c.BindAddr, c.BindPort = "0.0.0.0", DefaultPort
	if d.cfg.bind != "" {
		c.BindAddr, c.BindPort, _ = splitBind(d.cfg.bind)
	}
	c.AdvertiseAddr, c.AdvertisePort = "", c.BindPort
	if d.cfg.advertise != "" {
		host, port, _ := splitAdvertise(d.cfg.advertise)
		c.AdvertiseAddr = host
		if port != 0 {
			c.AdvertisePort = port
		}
	}
	tr, err := newTransport(net.ParseIP(c.BindAddr), c.BindPort, c.Logger)
	if err != nil {
		return nil, nil, fmt.Errorf("wizard: swim: listen for gossip on %s: %w", net.JoinHostPort(c.BindAddr, strconv.Itoa(c.BindPort)), err)
	}
	c.Transport = tr
	if c.BindPort == 0 {
		c.BindPort = tr.port
	}
	if c.AdvertisePort == 0 {
		c.AdvertisePort = tr.port
	}
	c.Label = d.cfg.segment
	c.Keyring = d.keyring
	c.SecretKey = nil
	del := &delegate{d}
	c.Delegate, c.Events, c.Alive = del, del, del
	for _, f := range d.cfg.memberlistFuncs {
		f(c)
	}
	if c.Transport != memberlist.Transport(tr) {
		tr.Shutdown() // WithMemberlistConfig brought its own
		tr = nil
	}
	err = nil
	switch {
	case c.ProbeInterval <= 0 || c.GossipInterval <= 0:
		err = errors.New("wizard: swim: memberlist config: ProbeInterval and GossipInterval must be positive")
	case !d.cfg.insecure && c.Keyring == nil && len(c.SecretKey) == 0 && !isLoopback(c.BindAddr):
		err = fmt.Errorf("wizard: swim: gossip on %s would not be encrypted: anyone who can reach the port could join the cluster and announce members; set WithKeys, or WithInsecure to gossip in the clear anyway (a loopback address needs neither)",
			net.JoinHostPort(c.BindAddr, strconv.Itoa(c.BindPort)))
	}
	if err != nil {
		if tr != nil {
			tr.Shutdown()
		}
		return nil, nil, err
	}
	return c, tr, nil
}

// isLoopback reports whether host is a loopback IP address.
func isLoopback(host string) bool {
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// GossipAddr returns the gossip address other members reach this node at
// ("ip:port"), for use as their seed; "" before Start.
func (d *Discovery) GossipAddr() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.gossipAddr
}

// SelfChanged tells the Discovery that the node's pattern set changed; it
// re-announces the node's meta in the background. It never blocks, and
// changes in quick succession coalesce into one announcement. It
// implements discovery.SelfAnnouncer; the node calls it.
func (d *Discovery) SelfChanged() {
	select {
	case d.announce <- struct{}{}:
	default:
	}
}

// runAnnouncer re-announces on SelfChanged until Close.
func (d *Discovery) runAnnouncer(ctx context.Context) {
	defer d.wg.Done()
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.announce:
		}
		d.reannounce()
	}
}

// reannounce reads the node's state and, when its meta changed, has
// memberlist gossip it. A state that cannot be encoded is logged and the
// members keep the last good one.
func (d *Discovery) reannounce() {
	b, err := d.encodeSelf(d.host.Self())
	if err != nil {
		d.log.Error("wizard: swim: cannot announce the node's new state; members keep the previous one", "err", err)
		return
	}
	if old := d.meta.Load(); old != nil && bytes.Equal(*old, b) {
		return
	}
	d.meta.Store(&b)
	// UpdateNode waits until the update went out to a member; it is
	// queued either way, so the timeout only bounds the wait.
	if err := d.ml.UpdateNode(d.broadcastTimeout()); err != nil {
		d.log.Debug("wizard: swim: update not yet gossiped", "err", err)
	}
}

// broadcastTimeout bounds the wait for an update or a leave to go out to
// a member: five gossip intervals, within 100 ms to 1 s.
func (d *Discovery) broadcastTimeout() time.Duration {
	return min(max(5*d.mlConfig.GossipInterval, 100*time.Millisecond), time.Second)
}

// encodeSelf is the meta announcing self.
func (d *Discovery) encodeSelf(self discovery.Peer) ([]byte, error) {
	return encodeMeta(meta{
		Protocol:  protocolVersion,
		Addr:      rpcAddr(self.Addr, d.gossipIP),
		Transport: self.Transport,
		Segment:   d.cfg.segment,
		Digest:    self.Digest,
	})
}

// Close leaves the cluster (announcing it, so the others drop this node at
// once rather than after failure detection) and stops gossip and every
// goroutine of the Discovery. It is idempotent; the node calls it when it
// shuts down.
func (d *Discovery) Close() error {
	return d.stop(true)
}

// stop stops the Discovery, leaving the cluster first if leave is set.
func (d *Discovery) stop(leave bool) error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	ml := d.ml
	d.mu.Unlock()
	if ml == nil {
		return nil // never started
	}
	d.cancel()
	d.wg.Wait()
	if leave {
		if err := ml.Leave(d.broadcastTimeout()); err != nil {
			d.log.Debug("wizard: swim: leave not yet gossiped", "err", err)
		}
	}
	err := ml.Shutdown()
	d.memberlistLog.Close() // memberlist logs no more: what it suppressed is counted
	if err != nil {
		return fmt.Errorf("wizard: swim: shutdown: %w", err)
	}
	d.log.Info("wizard: swim: gossip stopped", "node", d.name, "left", leave)
	return nil
}

// splitName splits a memberlist name into the wizard node id and its
// instance (the run of the node; a random boot id when the node has none).
func splitName(name string) (id, boot string, ok bool) {
	i := strings.LastIndexByte(name, '/')
	if i <= 0 || i == len(name)-1 {
		return "", "", false
	}
	return name[:i], name[i+1:], true
}
