package swim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"
)

// hasSeeds says whether the node has anything to join; a node without
// seeds is the first of its cluster and waits to be joined.
func (d *Discovery) hasSeeds() bool {
	c := &d.cfg
	return len(c.seeds) > 0 || len(c.dnsSeeds) > 0 || len(c.seedFuncs) > 0
}

// runJoin joins the cluster: it resolves the seeds and joins them, again
// and again with jittered exponential backoff, until a seed answers,
// another member joined this node, or the seeds name only this node (it
// is the first of its cluster). Then, every re-join interval (jittered),
// it resolves the seeds again and joins those that are not live members:
// a partition may have cut them off, or a DNS name may resolve to new
// ones. A node alone again backs off as at first. Without re-joins
// (WithReconnect's negative interval) it ends after the first join. It
// ends at Close.
func (d *Discovery) runJoin(ctx context.Context) {
	defer d.wg.Done()
	first, longest := d.cfg.preset.joinBackoff()
	backoff := first
	timer := time.NewTimer(backoff)
	timer.Stop()
	defer timer.Stop()
	settled, warned := false, false
	for {
		ok, err := d.join(ctx)
		if ctx.Err() != nil {
			return
		}
		var wait time.Duration
		switch {
		case ok:
			if n := d.ml.NumMembers(); !settled && n > 1 {
				d.log.Info("wizard: swim: joined", "members", n)
			} else if !settled {
				d.log.Info("wizard: swim: the seeds name only this node; it is the first of its cluster")
			}
			if d.reconnectEvery <= 0 {
				return
			}
			settled, warned, backoff = true, false, first
			wait = jitter(rejoinEvery * d.reconnectEvery)
		default:
			settled = false
			wait = jitter(backoff) // jitter keeps a fleet from retrying in step
			level := slog.LevelDebug
			if backoff == longest && !warned {
				level, warned = slog.LevelWarn, true // alone for a while: say so, once
			}
			d.log.Log(ctx, level, "wizard: swim: join failed; retrying", "err", err, "in", wait)
			backoff = min(2*backoff, longest)
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
	}
}

// join makes one attempt; ok says the node is in a cluster (or the first
// of its own). A node with other members joins its seeds that are not
// members; ok all the same.
func (d *Discovery) join(ctx context.Context) (ok bool, err error) {
	d.joinAttempts.Add(1)
	inCluster := d.ml.NumMembers() > 1
	if inCluster && d.reconnectEvery <= 0 {
		return true, nil // joined by another member
	}
	rctx, cancel := context.WithTimeout(ctx, max(d.mlConfig.TCPTimeout, time.Second))
	addrs, self, err := d.resolveSeeds(rctx)
	cancel()
	if inCluster {
		d.rejoin(ctx, addrs, err)
		return true, nil
	}
	if len(addrs) == 0 {
		if self && err == nil {
			d.log.Debug("wizard: swim: the seeds name only this node; it is the first of its cluster")
			return true, nil
		}
		if err == nil {
			err = errors.New("wizard: swim: no seeds resolved")
		}
		return false, err
	}
	// One seed at a time, so that Close does not wait for all of them.
	var errs []error
	for _, a := range addrs {
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		n, err := d.ml.Join([]string{a})
		if n > 0 {
			d.log.Debug("wizard: swim: joined a seed", "seed", a, "members", d.ml.NumMembers())
			// The seed may be a node as new as this one, alone so far
			// (a headless Service lists the pods of a scale-up as they
			// start): join the seeds it did not make members, as a
			// re-join would, rather than stay a cluster apart until
			// then.
			d.rejoin(ctx, addrs, nil)
			return true, nil
		}
		errs = append(errs, err)
	}
	return false, fmt.Errorf("wizard: swim: no seed answered: %w", errors.Join(errs...))
}

// rejoin joins up to maxJoinsPerRun of the seeds addrs that are not live
// members, chosen at random; resolveErr is the error of resolving them.
func (d *Discovery) rejoin(ctx context.Context, addrs []string, resolveErr error) {
	if resolveErr != nil {
		d.log.Debug("wizard: swim: re-join: resolving seeds", "err", resolveErr)
	}
	live := d.liveAddrs()
	addrs = slices.DeleteFunc(addrs, func(a string) bool { return live[a] })
	rand.Shuffle(len(addrs), func(i, j int) { addrs[i], addrs[j] = addrs[j], addrs[i] })
	for _, a := range addrs[:min(len(addrs), maxJoinsPerRun)] {
		if ctx.Err() != nil {
			return
		}
		if live, err := d.joinAddr(ctx, a); live {
			d.log.Info("wizard: swim: joined a seed that was not a member", "seed", a, "members", d.ml.NumMembers())
		} else {
			d.log.Debug("wizard: swim: re-join: a seed that is not a member did not answer", "seed", a, "err", err)
		}
	}
}

// resolveSeeds returns the gossip addresses ("ip:port") of every seed
// source, without this node's own; self says the seeds named this node.
// Errors of some sources are returned along with the others' addresses.
func (d *Discovery) resolveSeeds(ctx context.Context) (addrs []string, self bool, err error) {
	c := &d.cfg
	r := c.resolver
	var errs []error
	add := func(hostports []string) {
		for _, a := range hostports {
			if a == d.gossipAddr {
				self = true
			} else if !slices.Contains(addrs, a) {
				addrs = append(addrs, a)
			}
		}
	}
	hosts := slices.Clone(c.seeds)
	for _, f := range c.seedFuncs {
		s, err := f(ctx)
		if err != nil {
			errs = append(errs, fmt.Errorf("wizard: swim: seed function: %w", err))
		}
		hosts = append(hosts, s...)
	}
	for _, h := range hosts {
		a, err := d.lookupHost(ctx, h)
		if err != nil {
			errs = append(errs, err)
		}
		add(a)
	}
	for _, name := range c.dnsSeeds {
		var a []string
		var err error
		if isSRVName(name) {
			a, err = d.lookupSRV(ctx, r, name)
		} else {
			a, err = d.lookupHost(ctx, name)
		}
		if err != nil {
			errs = append(errs, err)
		}
		add(a)
	}
	return addrs, self, errors.Join(errs...)
}

// isSRVName says whether name is an SRV name: its first label starts with
// an underscore ("_gossip._udp.svc.ns.svc.cluster.local").
func isSRVName(name string) bool { return strings.HasPrefix(name, "_") }

// defaultPort is the port of a seed given without one: this node's
// configured bind port when set, the members of a fleet sharing one, else
// DefaultPort.
func (d *Discovery) defaultPort() string {
	if d.cfg.bind != "" {
		if _, p, err := splitBind(d.cfg.bind); err == nil && p != 0 {
			return strconv.Itoa(p)
		}
	}
	return strconv.Itoa(DefaultPort)
}

// splitSeed splits a seed, "host:port" or "host", into its host and port
// (defaultPort when it has none).
func splitSeed(seed, defaultPort string) (host, port string, err error) {
	host, port, err = net.SplitHostPort(seed)
	if err != nil {
		host, port = strings.Trim(seed, "[]"), defaultPort
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return "", "", errors.New("bad port")
	}
	if host == "" {
		return "", "", errors.New("no host")
	}
	return host, port, nil
}

// lookupHost resolves "host:port" or "host" to "ip:port"s.
func (d *Discovery) lookupHost(ctx context.Context, hostport string) ([]string, error) {
	host, port, err := splitSeed(hostport, d.defaultPort())
	if err != nil {
		return nil, fmt.Errorf("wizard: swim: seed %q: %w", hostport, err)
	}
	return d.resolveIPs(ctx, host, port, hostport)
}

// resolveIPs resolves host (an IP literal or a name with A/AAAA records).
func (d *Discovery) resolveIPs(ctx context.Context, host, port, seed string) ([]string, error) {
	if host == "" {
		return nil, fmt.Errorf("wizard: swim: seed %q: no host", seed)
	}
	if ip := net.ParseIP(host); ip != nil {
		return []string{net.JoinHostPort(ip.String(), port)}, nil
	}
	ips, err := d.cfg.resolver.LookupIPAddr(ctx, host)
	if err != nil {
		return nil, fmt.Errorf("wizard: swim: seed %q: %w", seed, err)
	}
	out := make([]string, 0, len(ips))
	for _, ip := range ips {
		if ip.Zone != "" {
			continue // a link-local address with a zone: not a gossip address
		}
		out = append(out, net.JoinHostPort(ip.IP.String(), port))
	}
	return out, nil
}

// lookupSRV resolves an SRV name to the "ip:port"s of its targets.
func (d *Discovery) lookupSRV(ctx context.Context, r *net.Resolver, name string) ([]string, error) {
	_, srvs, err := r.LookupSRV(ctx, "", "", name)
	if err != nil {
		return nil, fmt.Errorf("wizard: swim: SRV seed %q: %w", name, err)
	}
	var out []string
	var errs []error
	for _, s := range srvs {
		host := strings.TrimSuffix(s.Target, ".")
		a, err := d.resolveIPs(ctx, host, strconv.Itoa(int(s.Port)), name)
		if err != nil {
			errs = append(errs, err)
		}
		out = append(out, a...)
	}
	return out, errors.Join(errs...)
}
