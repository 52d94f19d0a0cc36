package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/wizardmesh/wizard/internal/transportname"
	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/discovery"
	"github.com/wizardmesh/wizard/runtime/introspect"
	"github.com/wizardmesh/wizard/runtime/swim"
)

// meshFlags are the flags by which wizard joins a mesh.
type meshFlags struct {
	fs                                    *flag.FlagSet
	seeds, dns, peers, gossip             *string
	transport, preset, segment, gossipKey *string
	tlsCA, tlsCert, tlsKey, tlsServerName *string
	tlsInsecure, insecure, verbose        *bool
	timeout                               *time.Duration
	output                                *string
	envErrs                               []error
}

// envName is the environment variable of flag name.
func envName(name string) string {
	return "WIZARD_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

func envString(fs *flag.FlagSet, name, def, usage string) *string {
	if v, ok := os.LookupEnv(envName(name)); ok {
		def = v
	}
	return fs.String(name, def, usage)
}

func envBool(fs *flag.FlagSet, errs *[]error, name, usage string) *bool {
	def := false
	if v, ok := os.LookupEnv(envName(name)); ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			*errs = append(*errs, fmt.Errorf("%s=%q: want true or false", envName(name), v))
		}
		def = b
	}
	return fs.Bool(name, def, usage)
}

func envDuration(fs *flag.FlagSet, errs *[]error, name string, def time.Duration, usage string) *time.Duration {
	if v, ok := os.LookupEnv(envName(name)); ok {
		d, err := time.ParseDuration(v)
		if err != nil {
			*errs = append(*errs, fmt.Errorf("%s=%q: want a duration such as 5s", envName(name), v))
		} else {
			def = d
		}
	}
	return fs.Duration(name, def, usage)
}

// addOutputFlag registers --output alone, for commands that do not join.
func addOutputFlag(fs *flag.FlagSet) *string {
	return envString(fs, "output", "text", "output: text or json")
}

func addMeshFlags(fs *flag.FlagSet) *meshFlags {
	f := &meshFlags{fs: fs}
	f.seeds = envString(fs, "seeds", "", "comma-separated gossip addresses of mesh members to join (host:port)")
	f.dns = envString(fs, "dns", "", "comma-separated DNS names listing members to join (A/AAAA, or SRV for names starting with _)")
	f.peers = envString(fs, "peers", "", "comma-separated transport addresses of nodes to call, without gossip")
	f.gossip = envString(fs, "gossip", "", `gossip bind address (default "127.0.0.1:0" when every seed is on loopback, else "0.0.0.0:0")`)
	f.transport = envString(fs, "transport", "tcp", "transport: "+transportname.Names())
	f.preset = envString(fs, "preset", "lan", "gossip timings: lan, or fast (one host, tests)")
	f.segment = envString(fs, "segment", "", "gossip segment to join")
	f.gossipKey = envString(fs, "gossip-key", "", "gossip encryption key, base64 (16, 24 or 32 bytes)")
	f.tlsCA = envString(fs, "tls-ca", "", "PEM file of the CAs that sign the nodes' certificates (TLS)")
	f.tlsCert = envString(fs, "tls-cert", "", "PEM certificate file of this caller (mutual TLS; with --tls-key)")
	f.tlsKey = envString(fs, "tls-key", "", "PEM private key file of --tls-cert")
	f.tlsServerName = envString(fs, "tls-server-name", "", "name to verify the nodes' certificates against (default: the host dialled)")
	f.tlsInsecure = envBool(fs, &f.envErrs, "tls-insecure", "TLS without verifying the nodes' certificates (development; QUIC's self-signed examples)")
	f.insecure = envBool(fs, &f.envErrs, "insecure", "gossip (and serve wizard sub's events over TCP) in the clear beyond loopback")
	f.verbose = envBool(fs, &f.envErrs, "verbose", "log the node's warnings and debug lines to the standard error")
	f.timeout = envDuration(fs, &f.envErrs, "timeout", 5*time.Second, "how long to join the mesh, and how long each call (not a stream) may take")
	f.output = addOutputFlag(fs)
	return f
}

// source names where a flag's value came from, for an error.
func (f *meshFlags) source(name string) string {
	set := false
	f.fs.Visit(func(fl *flag.Flag) { set = set || fl.Name == name })
	if !set {
		if _, ok := os.LookupEnv(envName(name)); ok {
			return envName(name)
		}
	}
	return "--" + name
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// joined is a node of wizard's own in the mesh, and what it was given.
type joined struct {
	node      *runtime.Node
	transport runtime.Transport
	swim      *swim.Discovery
	tried     string // what the node was told to join, for errors
}

// join starts a node that only calls, as the flags say; listen, when
// not "", makes it serve too, on that address (wizard sub), with the
// further options opts.
func (f *meshFlags) join(stderr io.Writer, listen string, opts ...runtime.Option) (*joined, error) {
	if len(f.envErrs) > 0 {
		return nil, usagef("%v", errors.Join(f.envErrs...))
	}
	level := slog.LevelError + 4 // quiet: what goes wrong reaches the command's errors
	if *f.verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	t, err := f.newTransport(log, listen != "")
	if err != nil {
		return nil, err
	}
	seeds, dns, peers := splitList(*f.seeds), splitList(*f.dns), splitList(*f.peers)
	j := &joined{transport: t}
	var d discovery.Discovery
	switch {
	case len(peers) > 0 && len(seeds)+len(dns) > 0:
		return nil, usagef("%s and %s: give static peers or gossip seeds, not both", f.source("peers"), f.source("seeds"))
	case len(peers) > 0:
		for _, p := range peers {
			if _, _, err := net.SplitHostPort(p); err != nil {
				return nil, usagef("%s: %q is not host:port", f.source("peers"), p)
			}
		}
		d = runtime.StaticPeers(peers...)
		j.tried = "peers " + strings.Join(peers, ", ")
	case len(seeds)+len(dns) > 0:
		sd, err := f.newSwim(log, seeds, dns)
		if err != nil {
			return nil, err
		}
		d, j.swim = sd, sd
		var what []string
		if len(seeds) > 0 {
			what = append(what, "seeds "+strings.Join(seeds, ", "))
		}
		if len(dns) > 0 {
			what = append(what, "DNS names "+strings.Join(dns, ", "))
		}
		j.tried = strings.Join(what, " and ")
	default:
		return nil, usagef("no way to join a mesh: give --seeds, --dns or --peers (or %s, %s, %s)", envName("seeds"), envName("dns"), envName("peers"))
	}
	opts = append([]runtime.Option{runtime.WithTransport(t), runtime.WithDiscovery(d), runtime.WithLogger(log), runtime.WithDefaultTimeout(*f.timeout)}, opts...)
	if listen != "" {
		opts = append(opts, runtime.WithListen(listen))
	}
	n, err := runtime.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("join the mesh (%s): %w", j.tried, err)
	}
	j.node = n
	return j, nil
}

// newTransport makes the transport the flags ask for; serve: it serves
// too (wizard sub), with the certificate of --tls-cert when there is one.
func (f *meshFlags) newTransport(log *slog.Logger, serve bool) (runtime.Transport, error) {
	cfg, err := f.tlsConfig()
	if err != nil {
		return nil, err
	}
	if err := transportname.Check(*f.transport); err != nil {
		return nil, usagef("%s: %v", f.source("transport"), err)
	}
	// --tls-insecure is cfg's InsecureSkipVerify, for either transport.
	tc := transportname.Config{Logger: log, ClientTLS: cfg}
	if serve {
		tc.ServerTLS = serverTLS(cfg)
		tc.Insecure = *f.insecure
		tc.SelfSigned = *f.tlsInsecure && tc.ServerTLS == nil
	}
	t, err := transportname.New(*f.transport, tc)
	if err != nil && serve {
		return nil, fmt.Errorf("serve events (%s): %w", f.source("transport"), err)
	}
	return t, err
}

// serverTLS is what a node of wizard's serves with, from the client
// configuration the flags made: its certificate (--tls-cert), and the CAs
// of --tls-ca to verify the certificates the mesh's nodes present; nil
// without a certificate.
func serverTLS(client *tls.Config) *tls.Config {
	if client == nil || len(client.Certificates) == 0 {
		return nil
	}
	cfg := &tls.Config{Certificates: client.Certificates, MinVersion: tls.VersionTLS12}
	if client.RootCAs != nil {
		cfg.ClientCAs, cfg.ClientAuth = client.RootCAs, tls.VerifyClientCertIfGiven
	}
	return cfg
}

// tlsConfig is the client TLS the flags ask for, nil for none.
func (f *meshFlags) tlsConfig() (*tls.Config, error) {
	if *f.tlsCA == "" && *f.tlsCert == "" && *f.tlsKey == "" && *f.tlsServerName == "" && !*f.tlsInsecure {
		return nil, nil
	}
	cfg := &tls.Config{ServerName: *f.tlsServerName, InsecureSkipVerify: *f.tlsInsecure, MinVersion: tls.VersionTLS12}
	if *f.tlsCA != "" {
		pem, err := os.ReadFile(*f.tlsCA)
		if err != nil {
			return nil, usagef("%s: %v", f.source("tls-ca"), err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, usagef("%s %s: no PEM certificate in it", f.source("tls-ca"), *f.tlsCA)
		}
		cfg.RootCAs = pool
	}
	if (*f.tlsCert == "") != (*f.tlsKey == "") {
		return nil, usagef("%s and %s go together (mutual TLS)", f.source("tls-cert"), f.source("tls-key"))
	}
	if *f.tlsCert != "" {
		cert, err := tls.LoadX509KeyPair(*f.tlsCert, *f.tlsKey)
		if err != nil {
			return nil, usagef("%s / %s: %v", f.source("tls-cert"), f.source("tls-key"), err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

func (f *meshFlags) newSwim(log *slog.Logger, seeds, dns []string) (*swim.Discovery, error) {
	bind := *f.gossip
	if bind == "" {
		bind = "0.0.0.0:0"
		if allLoopback(seeds) && len(dns) == 0 {
			bind = "127.0.0.1:0"
		}
	}
	var preset swim.Preset
	switch *f.preset {
	case "lan":
		preset = swim.LAN
	case "fast":
		preset = swim.Fast
	default:
		return nil, usagef("%s %q: want lan or fast", f.source("preset"), *f.preset)
	}
	opts := []swim.Option{swim.WithBindAddr(bind), swim.WithPreset(preset), swim.WithLogger(log), swim.WithSegment(*f.segment)}
	if len(seeds) > 0 {
		opts = append(opts, swim.WithSeeds(seeds...))
	}
	if len(dns) > 0 {
		opts = append(opts, swim.WithDNSSeeds(dns...))
	}
	if *f.gossipKey != "" {
		key, err := base64.StdEncoding.DecodeString(*f.gossipKey)
		if err != nil {
			return nil, usagef("%s: not base64 (a 16, 24 or 32-byte key, e.g. from: head -c32 /dev/urandom | base64)", f.source("gossip-key"))
		}
		opts = append(opts, swim.WithKeys(key))
	}
	if *f.insecure {
		opts = append(opts, swim.WithInsecure())
	}
	d, err := swim.New(opts...)
	if err != nil {
		return nil, usagef("gossip: %v", err)
	}
	return d, nil
}

func allLoopback(addrs []string) bool {
	for _, a := range addrs {
		host, _, err := net.SplitHostPort(a)
		if err != nil {
			host = a
		}
		ip := net.ParseIP(host)
		if host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return false
		}
	}
	return true
}

// settle waits, within ctx, until the node knows the mesh: at least one
// peer, and every peer it knows connected with its catalog loaded or
// failing to be; then a few polls more without change (gossip may still
// bring members). It fails when no peer answered, naming what was tried:
// at once when every peer it knows failed (a refused connection), else
// when ctx ends.
func (j *joined) settle(ctx context.Context) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	stable, last := 0, ""
	for {
		ms := j.node.Members()
		state, done, answered := membersState(ms, subscribers(j.node))
		if done && state == last {
			stable++
		} else {
			stable = 0
		}
		last = state
		if stable >= 3 && answered {
			return nil
		}
		if stable >= 3 && done {
			return j.unreachable(ms, "") // every peer known failed: waiting would not help
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			if answered {
				return nil // what it knows by now
			}
			return j.unreachable(ms, " within the timeout")
		}
	}
}

// subscribers returns the peers that hold subscriptions in n's routing,
// by id and by address (as [runtime.Node.Subscriptions] names them).
func subscribers(n *runtime.Node) map[string]bool {
	holders := map[string]bool{}
	for _, s := range n.Subscriptions() {
		for _, r := range s.Remote {
			holders[r] = true
		}
	}
	return holders
}

// membersState sums up ms for settle: a string that changes with what is
// known, whether every peer is settled, and whether any answered. A peer
// has answered when its catalog has come: it lists handlers' patterns,
// or it holds subscriptions (subscribers), which Member.Patterns does not
// count.
func membersState(ms []introspect.Member, subscribers map[string]bool) (string, bool, bool) {
	var b strings.Builder
	done, answered := len(ms) > 1, false
	for _, m := range ms[1:] {
		loaded := m.Connected && (m.Patterns > 0 || subscribers[m.ID] || subscribers[m.Addr])
		answered = answered || loaded
		if !loaded && m.LastError == "" {
			done = false
		}
		fmt.Fprintf(&b, "%s/%s/%v/%d/%v/%v;", m.ID, m.Addr, m.Connected, m.Patterns, loaded, m.LastError != "")
	}
	return b.String(), done, answered
}

// unreachable is the error of a join that found no peer.
func (j *joined) unreachable(ms []introspect.Member, when string) error {
	var why []string
	for _, m := range ms[1:] {
		s := m.Addr
		if m.LastError != "" {
			s += " (" + m.LastError + ")"
		} else if !m.Connected {
			s += " (not answered)"
		}
		why = append(why, s)
	}
	msg := fmt.Sprintf("no node of the mesh answered%s; tried %s", when, j.tried)
	if j.swim != nil {
		msg += fmt.Sprintf(" (gossiping from %s)", j.swim.GossipAddr())
		if len(why) == 0 {
			msg += "; no member answered the gossip: check the addresses, and that --gossip-key and --segment are the mesh's (members drop gossip they cannot decrypt or that is of another segment)"
		}
	}
	if len(why) > 0 {
		msg += "; nodes known: " + strings.Join(why, ", ")
	}
	return runtime.Errorf(runtime.CodeUnavailable, "%s", msg)
}

func (j *joined) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = j.node.Shutdown(ctx)
}
