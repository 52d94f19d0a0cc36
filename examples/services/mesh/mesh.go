// Package mesh gives the example commands their discovery flags — either
// -peers (static addresses, no gossip) or -gossip and -seeds (SWIM gossip
// through runtime/swim, the caller learning every service's address from
// the mesh) — and Serve, the main of a command that serves.
package mesh

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/wizardmesh/wizard/internal/transportname"
	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/swim"
)

// Flags are the discovery flags of one command.
type Flags struct {
	peers, gossip, seeds, preset *string
	swim                         *swim.Discovery
}

// AddFlags registers the flags on fs. peersDefault is -peers' default
// ("" for a command that serves and needs no peers).
func AddFlags(fs *flag.FlagSet, peersDefault string) *Flags {
	return &Flags{
		peers:  fs.String("peers", peersDefault, "comma-separated transport addresses of nodes to call, without gossip"),
		gossip: fs.String("gossip", "", `gossip bind address ("127.0.0.1:0" picks a port): join a mesh by SWIM gossip instead of -peers`),
		seeds:  fs.String("seeds", "", "comma-separated gossip addresses of mesh members to join (with -gossip; none: the first member)"),
		preset: fs.String("preset", "fast", "gossip timings: fast (single host, tests) or lan"),
	}
}

// Option returns the discovery option the flags ask for, or nil for
// none. Gossip logs to log (nil: nowhere).
func (f *Flags) Option(log *slog.Logger) (runtime.Option, error) {
	if *f.gossip == "" {
		if *f.seeds != "" {
			return nil, fmt.Errorf("-seeds needs -gossip")
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

// Serve is the main of a command that serves: it parses the command line
// (-listen, -transport and the discovery flags), starts a node, lets
// register add the service, prints "NAME: serving N patterns on KIND
// ADDR[, gossip ADDR]", serves until interrupted, then shuts down
// gracefully (leaves the mesh, goaway, drain). The node, its transport and
// gossip log warnings and errors to the standard error (a panic in a
// handler, a peer lost, a connection refused for a limit).
//
// The examples serve plain TCP and gossip without keys, which the
// transport and gossip allow on loopback addresses only: -listen and
// -gossip on another address fail, saying what to set.
func Serve(name, defaultListen string, register func(*runtime.Node) error) error {
	listen := flag.String("listen", defaultListen, "address to serve on (port 0 picks one)")
	kind := flag.String("transport", "tcp", "transport: "+transportname.Names())
	discovery := AddFlags(flag.CommandLine, "")
	flag.Parse()
	log := Logger()
	// quic: a development setup, a throwaway self-signed certificate and
	// no verification; production sets quic.WithServerTLS/WithClientTLS.
	t, err := transportname.New(*kind, transportname.Config{Logger: log, SelfSigned: true})
	if err != nil {
		return fmt.Errorf("-transport: %w", err)
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
	fmt.Printf("%s: serving %d patterns on %s %s%s\n", name, len(node.Patterns()), *kind, node.Addr(), discovery.Describe())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return node.Shutdown(shutdown)
}

// Logger returns the servers' logger: warnings and errors, as text, to
// the standard error.
func Logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}
