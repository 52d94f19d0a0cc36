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
// another member joined this node, the seeds name only this node (it is
// the first of its cluster), or Close.
func (d *Discovery) runJoin(ctx context.Context) {
	defer d.wg.Done()
	first, longest := d.cfg.preset.joinBackoff()
	backoff := first
	timer := time.NewTimer(backoff)
	timer.Stop()
	defer timer.Stop()
	for {
		done, err := d.join(ctx)
		if done {
			return
		}
		wait := backoff/2 + rand.N(backoff/2+1) // jitter keeps a fleet from retrying in step
		level := slog.LevelDebug
		if backoff == longest {
			level = slog.LevelWarn // still alone after a while: say so
		}
		d.log.Log(ctx, level, "wizard: swim: join failed; retrying", "err", err, "in", wait)
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		backoff = min(2*backoff, longest)
	}
}

// join makes one attempt; done says joining is over.
func (d *Discovery) join(ctx context.Context) (done bool, err error) {
	if ctx.Err() != nil {
		return true, nil
	}
	d.joinAttempts.Add(1)
	if d.ml.NumMembers() > 1 {
		d.log.Info("wizard: swim: joined by another member")
		return true, nil
	}
	rctx, cancel := context.WithTimeout(ctx, max(d.mlConfig.TCPTimeout, time.Second))
	addrs, self, err := d.resolveSeeds(rctx)
	cancel()
	if len(addrs) == 0 {
		if self && err == nil {
			d.log.Info("wizard: swim: the seeds name only this node; it is the first of its cluster")
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
			return true, nil
		}
		n, err := d.ml.Join([]string{a})
		if n > 0 {
			d.log.Info("wizard: swim: joined", "seed", a, "members", d.ml.NumMembers())
			return true, nil
		}
		errs = append(errs, err)
	}
	return false, fmt.Errorf("wizard: swim: no seed answered: %w", errors.Join(errs...))
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
