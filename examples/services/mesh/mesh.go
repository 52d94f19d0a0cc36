// Package mesh gives the example commands their discovery flags — either
// -peers (static addresses, no gossip) or -gossip with -seeds or -dns
// (SWIM gossip through runtime/swim, the caller learning every service's
// address from the mesh) — their TLS and gossip-key flags, and Serve, the
// main of a command that serves.
package mesh

import (
	"context"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/wizardmesh/wizard/internal/transportname"
	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/swim"
)

// Flags are the discovery flags of one command.
type Flags struct {
	peers, gossip, advertise, seeds, dns, preset, gossipKeyFile *string
	tls                                                         tlsFlags
	swim                                                        *swim.Discovery
}

// AddFlags registers the flags on fs. peersDefault is -peers' default
// ("" for a command that serves and needs no peers).
func AddFlags(fs *flag.FlagSet, peersDefault string) *Flags {
	return &Flags{
		peers:         fs.String("peers", peersDefault, "comma-separated transport addresses of nodes to call, without gossip"),
		gossip:        fs.String("gossip", "", `gossip bind address ("127.0.0.1:0" picks a port): join a mesh by SWIM gossip instead of -peers`),
		advertise:     fs.String("gossip-advertise", "", `the gossip address other members reach this node at, "ip" or "ip:port", when -gossip binds every interface (a pod: its IP; default: the first private address)`),
		seeds:         fs.String("seeds", "", "comma-separated gossip addresses of mesh members to join (with -gossip; none: the first member)"),
		dns:           fs.String("dns", "", `comma-separated DNS names whose records list mesh members to join (with -gossip): "name[:port]" for A/AAAA records, "_gossip._udp.name" for SRV, such as a Kubernetes headless service`),
		preset:        fs.String("preset", "fast", "gossip timings: fast (single host, tests) or lan"),
		gossipKeyFile: fs.String("gossip-key-file", "", "a file holding the base64 gossip key (16, 24 or 32 bytes): gossip encrypted, as an address other than loopback needs"),
		tls:           addTLSFlags(fs),
	}
}

// Option returns the discovery option the flags ask for, or nil for
// none. Gossip logs to log (nil: nowhere).
func (f *Flags) Option(log *slog.Logger) (runtime.Option, error) {
	if *f.gossip == "" {
		switch {
		case *f.seeds != "":
			return nil, fmt.Errorf("-seeds needs -gossip")
		case *f.dns != "":
			return nil, fmt.Errorf("-dns needs -gossip")
		case *f.advertise != "":
			return nil, fmt.Errorf("-gossip-advertise needs -gossip")
		case *f.gossipKeyFile != "":
			return nil, fmt.Errorf("-gossip-key-file needs -gossip")
		}
		if *f.peers == "" {
			return nil, nil
		}
		return runtime.WithDiscovery(runtime.StaticPeers(strings.Split(*f.peers, ",")...)), nil
	}
	preset := swim.Fast
	switch *f.preset {
	case "fast":
	case "lan":
		preset = swim.LAN
	default:
		return nil, fmt.Errorf("unknown -preset %q (want fast or lan)", *f.preset)
	}
	opts := []swim.Option{swim.WithBindAddr(*f.gossip), swim.WithPreset(preset), swim.WithLogger(log)}
	if *f.seeds != "" {
		opts = append(opts, swim.WithSeeds(strings.Split(*f.seeds, ",")...))
	}
	if *f.advertise != "" {
		opts = append(opts, swim.WithAdvertiseAddr(*f.advertise))
	}
	if *f.dns != "" {
		opts = append(opts, swim.WithDNSSeeds(strings.Split(*f.dns, ",")...))
	}
	if *f.gossipKeyFile != "" {
		key, err := readKey(*f.gossipKeyFile)
		if err != nil {
			return nil, fmt.Errorf("-gossip-key-file: %w", err)
		}
		opts = append(opts, swim.WithKeys(key))
	}
	d, err := swim.New(opts...)
	if err != nil {
		return nil, err
	}
	f.swim = d
	return runtime.WithDiscovery(d), nil
}

// Describe says how the node is found, for the commands' first line:
// ", gossip ADDR" when it gossips, "" otherwise.
func (f *Flags) Describe() string {
	if f.swim == nil {
		return ""
	}
	return ", gossip " + f.swim.GossipAddr()
}

// Transport makes the transport kind names ("tcp" or "quic"), with the
// mutual TLS the flags ask for. Without TLS flags, quic serves a
// throwaway self-signed certificate and verifies none: for development.
func (f *Flags) Transport(kind string, log *slog.Logger) (runtime.Transport, error) {
	server, client, err := f.tls.configs()
	if err != nil {
		return nil, err
	}
	t, err := transportname.New(kind, transportname.Config{Logger: log, ServerTLS: server, ClientTLS: client, SelfSigned: server == nil})
	if err != nil {
		return nil, fmt.Errorf("-transport: %w", err)
	}
	return t, nil
}

// readKey reads a base64 gossip key from file.
func readKey(file string) ([]byte, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(b)))
	if err != nil {
		return nil, fmt.Errorf("%s: not base64 (a 16, 24 or 32-byte key, e.g. from: head -c32 /dev/urandom | base64)", file)
	}
	return key, nil
}

// Serve is the main of a command that serves: it parses the command line
// (-listen, -transport, -health-addr and the discovery flags), starts a
// node, lets register add the service, prints "NAME: serving N patterns
// on KIND ADDR[, gossip ADDR][, health ADDR]", serves until SIGINT or
// SIGTERM, then shuts down gracefully (leaves the mesh, goaway, drain
// for up to [DrainTimeout]). The node, its transport and gossip log
// warnings and errors to the standard error (a panic in a handler, a peer
// lost, a connection refused for a limit).
//
// With -health-addr it serves the node's probes there (runtime/health):
// /readyz answers 503 from the moment the shutdown begins, /healthz 200
// until the process exits.
//
// Without -tls-cert, -tls-key and -tls-ca the examples serve plain TCP,
// and without -gossip-key-file they gossip without keys, which the
// transport and gossip allow on loopback addresses only: -listen and
// -gossip on another address fail then, saying what to set.
func Serve(name, defaultListen string, register func(*runtime.Node) error) error {
	listen := flag.String("listen", defaultListen, "address to serve on (port 0 picks one)")
	kind := flag.String("transport", "tcp", "transport: "+transportname.Names())
	healthAddr := flag.String("health-addr", "", `address to serve the readiness and liveness probes on, /readyz and /healthz (":8081"; none by default)`)
	discovery := AddFlags(flag.CommandLine, "")
	flag.Parse()
	log := Logger()
	t, err := discovery.Transport(*kind, log)
	if err != nil {
		return err
	}
	opts := []runtime.Option{runtime.WithTransport(t), runtime.WithListen(*listen), runtime.WithLogger(log)}
	if o, err := discovery.Option(log); err != nil {
		return err
	} else if o != nil {
		opts = append(opts, o)
	}
	node, err := runtime.New(opts...)
	if err != nil {
		return err
	}
	if err := register(node); err != nil {
		node.Close()
		return err
	}
	probes, err := serveHealth(*healthAddr, node)
	if err != nil {
		node.Close()
		return err
	}
	// Signals are caught before the line that says the service is up, so
	// that a SIGTERM sent as soon as it is read shuts it down gracefully.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fmt.Printf("%s: serving %d patterns on %s %s%s%s\n", name, len(node.Patterns()), *kind, node.Addr(), discovery.Describe(), probes.describe())
	<-ctx.Done()
	shutdown, cancel := context.WithTimeout(context.Background(), DrainTimeout)
	defer cancel()
	err = node.Shutdown(shutdown)
	return errors.Join(err, probes.close())
}

// Logger returns the servers' logger: warnings and errors, as text, to
// the standard error.
func Logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}
