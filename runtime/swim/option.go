package swim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"time"

	"github.com/hashicorp/memberlist"
)

// Option configures a [Discovery] in [New].
type Option interface{ apply(*config) error }

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

type config struct {
	bind, advertise string
	seeds           []string
	dnsSeeds        []string
	seedFuncs       []func(context.Context) ([]string, error)
	resolver        *net.Resolver
	segment         string
	keys            [][]byte // primary first
	preset          Preset
	memberlistFuncs []func(*memberlist.Config)
	logger          *slog.Logger
	insecure        bool
	reconnectEvery  time.Duration // 0: the preset's
	reconnectFor    time.Duration // 0: the preset's
}

// DefaultPort is the gossip port when none is given: memberlist's, 7946.
const DefaultPort = 7946

// WithBindAddr sets the address gossip listens on, "host:port", for both
// UDP and TCP. Port 0 lets the system pick a free port, which
// [Discovery.GossipAddr] reports after Start. The default is
// "0.0.0.0:7946". The host must be an IP address (or empty, for every
// interface). An address other than loopback needs [WithKeys] or
// [WithInsecure].
func WithBindAddr(addr string) Option {
	return optionFunc(func(c *config) error {
		if _, _, err := splitBind(addr); err != nil {
			return fmt.Errorf("WithBindAddr(%q): %w", addr, err)
		}
		c.bind = addr
		return nil
	})
}

// WithAdvertiseAddr sets the gossip address other members reach this
// node at, "ip:port" or "ip", when it differs from the bind address (NAT,
// containers); without a port, the bind port. By default the bind address
// is advertised or, when bound to all interfaces, the first private
// (RFC 1918, RFC 4193) address of an interface that is up.
func WithAdvertiseAddr(addr string) Option {
	return optionFunc(func(c *config) error {
		if _, _, err := splitAdvertise(addr); err != nil {
			return fmt.Errorf("WithAdvertiseAddr(%q): %w", addr, err)
		}
		c.advertise = addr
		return nil
	})
}

// WithSeeds adds gossip addresses of members to join: "host:port", or a
// host alone for the default port (the bind port if set, else
// [DefaultPort]). Host names resolve through the resolver on every join
// attempt; [New] checks the form of each.
func WithSeeds(addrs ...string) Option {
	return optionFunc(func(c *config) error {
		for _, a := range addrs {
			if _, _, err := splitSeed(a, "0"); err != nil {
				return fmt.Errorf("WithSeeds: seed %q: %w", a, err)
			}
		}
		c.seeds = append(c.seeds, addrs...)
		return nil
	})
}

// WithDNSSeeds adds DNS names whose records list members to join,
// resolved again on every join attempt. A name whose first label starts
// with an underscore is an SRV name (a Kubernetes headless service:
// "_gossip._udp.wizard.default.svc.cluster.local"): its records give
// hosts and ports. Any other name is looked up for A and AAAA records,
// "host" or "host:port"; without a port the default applies (the bind
// port if set, else [DefaultPort]).
func WithDNSSeeds(names ...string) Option {
	return optionFunc(func(c *config) error {
		for _, n := range names {
			if isSRVName(n) {
				continue
			}
			if _, _, err := splitSeed(n, "0"); err != nil {
				return fmt.Errorf("WithDNSSeeds: name %q: %w", n, err)
			}
		}
		c.dnsSeeds = append(c.dnsSeeds, names...)
		return nil
	})
}

// WithSeedFunc adds a function that returns gossip addresses to join, in
// the forms [WithSeeds] takes. It is called on every join attempt, with a
// context that ends with the attempt; an error counts as no seeds from it
// and is logged. [New] fails when f is nil.
func WithSeedFunc(f func(ctx context.Context) ([]string, error)) Option {
	return optionFunc(func(c *config) error {
		if f == nil {
			return errors.New("WithSeedFunc(nil): no function")
		}
		c.seedFuncs = append(c.seedFuncs, f)
		return nil
	})
}

// WithResolver sets the resolver for seed host names and [WithDNSSeeds];
// nil, the default, is net.DefaultResolver.
func WithResolver(r *net.Resolver) Option {
	return optionFunc(func(c *config) error {
		c.resolver = r
		return nil
	})
}

// WithSegment puts the node in a segment: members of different segments
// never see each other, even when one is given the other's address as a
// seed. The segment travels as memberlist's label on every packet and
// stream (authenticated data when gossip is encrypted). The default is
// the empty segment; a name is at most 128 bytes.
func WithSegment(name string) Option {
	return optionFunc(func(c *config) error {
		if len(name) > maxSegmentLen {
			return fmt.Errorf("WithSegment: the name is %d bytes, the limit is %d", len(name), maxSegmentLen)
		}
		c.segment = name
		return nil
	})
}

// WithKeys encrypts gossip with AES-GCM: primary encrypts what this node
// sends; primary and the secondary keys decrypt what it receives. Each key
// is 16, 24 or 32 bytes (AES-128, -192, -256). Members without a key that
// decrypts a packet drop it, so a node without the cluster's keys can
// neither join nor inject members. Rotate keys at run time with
// [Discovery.InstallKey], [Discovery.UseKey] and [Discovery.RemoveKey].
func WithKeys(primary []byte, secondary ...[]byte) Option {
	keys := [][]byte{slices.Clone(primary)}
	for _, k := range secondary {
		keys = append(keys, slices.Clone(k))
	}
	return optionFunc(func(c *config) error {
		for i, k := range keys {
			if err := memberlist.ValidateKey(k); err != nil {
				which := "the primary key"
				if i > 0 {
					which = "secondary key " + strconv.Itoa(i)
				}
				// Never the key itself: it is a secret.
				return fmt.Errorf("WithKeys: %s is %d bytes; a key is 16, 24 or 32 bytes (AES-128, -192, -256)", which, len(k))
			}
		}
		c.keys = keys
		return nil
	})
}

// WithInsecure lets gossip run unencrypted on an address other than
// loopback. Without keys, anyone who can reach the gossip port can join
// the cluster, announce members (which every node then dials and routes
// to) and read who serves what: for a network that is trusted as a whole.
// Without it, [Discovery.Start] fails when gossip binds to such an address
// with no [WithKeys] (nor a keyring given through [WithMemberlistConfig]);
// loopback addresses need neither. [New] fails when WithKeys is given too.
func WithInsecure() Option {
	return optionFunc(func(c *config) error {
		c.insecure = true
		return nil
	})
}

// WithPreset sets the gossip timings: [LAN] (the default) or [Fast].
func WithPreset(p Preset) Option {
	return optionFunc(func(c *config) error {
		if !p.valid() {
			return fmt.Errorf("WithPreset(%v): want LAN or Fast", p)
		}
		c.preset = p
		return nil
	})
}

// WithMemberlistConfig is the escape hatch to memberlist: f may change the
// configuration after everything else is set, just before memberlist
// starts. Changing Name, Delegate, Events or Alive breaks discovery.
// Transport is this package's UDP and TCP transport, bound already;
// setting it to nil makes memberlist bind its own (which allocates 64 KiB
// per packet received), or set another. [New] fails when f is nil; when
// the configuration f leaves cannot work (no probe or gossip interval),
// [Discovery.Start] does.
func WithMemberlistConfig(f func(*memberlist.Config)) Option {
	return optionFunc(func(c *config) error {
		if f == nil {
			return errors.New("WithMemberlistConfig(nil): no function")
		}
		c.memberlistFuncs = append(c.memberlistFuncs, f)
		return nil
	})
}

// WithLogger sets the logger, for this package's lines and memberlist's
// (their levels mapped from memberlist's [DEBUG], [INFO], [WARN] and [ERR]
// prefixes, the sender of a packet or stream in a remote attribute;
// memberlist's warnings and errors rate-limited, see the package
// documentation). With nil, the default, nothing is logged.
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(c *config) error {
		c.logger = l
		return nil
	})
}

// WithReconnect sets how a node finds again the members a partition cut
// off, which memberlist gives up on GossipToTheDeadTime after their death.
// Every interval (jittered between half of it and all of it), the node
// joins again up to three of the members that failed (that memberlist
// declared dead, not those that left), chosen at random, for timeout after
// their death; an address that keeps failing is tried less often, up to
// three intervals apart. Every three intervals it also resolves its seeds
// again and joins those that are not live members. Zero keeps the
// preset's values ([LAN]: every 10 s for 24 h; [Fast]: every second for
// 10 minutes). A negative interval turns both off: the node joins its
// seeds until one answers or another member joins it, and then no more.
// [New] fails when timeout is negative, or interval under 10 ms but
// positive.
func WithReconnect(interval, timeout time.Duration) Option {
	return optionFunc(func(c *config) error {
		switch {
		case interval > 0 && interval < 10*time.Millisecond:
			return fmt.Errorf("WithReconnect(%v, %v): an interval under 10ms would keep gossip busy joining", interval, timeout)
		case timeout < 0:
			return fmt.Errorf("WithReconnect(%v, %v): a negative timeout", interval, timeout)
		}
		c.reconnectEvery, c.reconnectFor = interval, timeout
		return nil
	})
}
