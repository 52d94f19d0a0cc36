// Command wizard-gateway serves HTTP and WebSocket into a wizard mesh: the
// gateway of package gateway, as a program. Run wizard-gateway --help.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/wizardmesh/wizard/gateway"
	"github.com/wizardmesh/wizard/gateway/config"
	"github.com/wizardmesh/wizard/internal/version"
	"github.com/wizardmesh/wizard/runtime"
)

func main() {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGHUP, syscall.SIGINT, syscall.SIGTERM)
	keepGCFloor(os.Getenv, gcFloor, debug.SetGCPercent)
	os.Exit(run(os.Args[1:], os.Getenv, os.Stdout, os.Stderr, sigs, nil))
}

// run is the program: it returns the exit code. sigs delivers SIGHUP
// (reload) and SIGINT / SIGTERM (shut down); serving, if not nil, is told
// the address once the gateway serves.
func run(args []string, getenv func(string) string, stdout, stderr io.Writer, sigs <-chan os.Signal, serving func(addr string)) int {
	if len(args) > 0 && args[0] == "check-config" {
		return checkConfig(args[1:], stdout, stderr)
	}
	if len(args) == 1 && (args[0] == "--version" || args[0] == "-version" || args[0] == "-V") {
		version.Read().Write(stdout, "wizard-gateway")
		return 0
	}
	var f flags
	if err := f.parse(args, getenv, stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage(stdout, &f)
			return 0
		}
		fmt.Fprintf(stderr, "wizard-gateway: %v\nRun wizard-gateway --help for the flags.\n", err)
		return 2
	}
	if f.config == "" {
		fmt.Fprintf(stderr, "wizard-gateway: no configuration: give -c FILE (or %s)\nRun wizard-gateway --help for the flags.\n", envName("config"))
		return 2
	}
	if err := serve(&f, stderr, sigs, serving); err != nil {
		fmt.Fprintf(stderr, "wizard-gateway: %v\n", err)
		return 1
	}
	return 0
}

// checkConfig is the check-config subcommand.
func checkConfig(args []string, stdout, stderr io.Writer) int {
	if len(args) != 1 {
		fmt.Fprintln(stderr, "usage: wizard-gateway check-config FILE")
		return 2
	}
	cfg, err := config.Load(args[0])
	if err == nil {
		err = checkServing(cfg)
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	fmt.Fprintf(stdout, "%s: ok\n", args[0])
	return 0
}

// checkServing checks what serving cfg needs beyond a valid file: the
// gateway's key files, JWKS and TLS files ([gateway.Check]), the mesh's
// TLS files and gossip key; each problem on a line of its own, naming
// the file.
func checkServing(cfg *config.Config) error {
	errs := []error{gateway.Check(cfg)}
	if t := cfg.Mesh.TLS; t != nil {
		if _, _, err := meshTLS(t); err != nil {
			errs = append(errs, fmt.Errorf("mesh.tls: %w", err))
		}
	}
	if _, err := gossipKey(cfg.Mesh); err != nil {
		errs = append(errs, fmt.Errorf("mesh: %w", err))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%s: the file is valid, but serving it would fail:\n%w", cfg.File(), err)
	}
	return nil
}

// serve runs the gateway until SIGINT or SIGTERM.
func serve(f *flags, stderr io.Writer, sigs <-chan os.Signal, serving func(string)) error {
	level, err := parseLevel(f.logLevel)
	if err != nil {
		return err
	}
	cfg, err := config.Load(f.config)
	if err != nil {
		return err
	}
	log, logFile, err := newLogger(cfg.AccessLog, level, stderr)
	if err != nil {
		return err
	}
	defer logFile.Close()
	if f.descriptor != "" {
		n, err := loadDescriptors(f.descriptor)
		if err != nil {
			return fmt.Errorf("--descriptors: %w", err)
		}
		log.Info("wizard-gateway: protobuf types loaded", "file", f.descriptor, "types", n)
	}
	addr, err := listenAddr(cfg.Server.Listen, f.ip, f.port)
	if err != nil {
		return err
	}
	applyMeshFlags(&cfg.Mesh, f)
	if len(cfg.Mesh.Peers)+len(cfg.Mesh.Seeds)+len(cfg.Mesh.DNS) == 0 {
		log.Warn("wizard-gateway: no mesh.peers, mesh.seeds or mesh.dns (nor --peers, --seeds): the gateway knows no other node until one connects to it")
	}
	nopts, err := nodeOptions(cfg.Mesh, log)
	if err != nil {
		return fmt.Errorf("mesh: %w", err)
	}
	node, err := runtime.New(nopts...)
	if err != nil {
		return fmt.Errorf("mesh: %w", err)
	}
	gopts := []gateway.Option{gateway.WithLogger(log)}
	if f.sslCert != "" || f.sslKey != "" {
		gopts = append(gopts, gateway.WithTLSFiles(f.sslCert, f.sslKey))
	}
	g, err := gateway.New(node, cfg, gopts...)
	if err != nil {
		node.Close()
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		g.Close()
		node.Close()
		return err
	}
	served := make(chan error, 1)
	go func() { served <- g.Serve(ln) }()
	log.Info("wizard-gateway: serving", "addr", ln.Addr().String(), "routes", len(cfg.Table().Routes()), "node", node.ID(), "mesh", node.Addr())
	if serving != nil {
		serving(ln.Addr().String())
	}
	grace := cfg.Server.ShutdownGrace + 5*time.Second // as served: a reload does not change it
	for {
		select {
		case err := <-served:
			node.Close()
			if errors.Is(err, http.ErrServerClosed) {
				return nil
			}
			return err
		case s := <-sigs:
			if s == syscall.SIGHUP {
				cfg = reload(g, f, cfg, log)
				continue
			}
			log.Info("wizard-gateway: shutting down", "signal", s.String())
			ctx, cancel := context.WithTimeout(context.Background(), grace)
			err := g.Shutdown(ctx)
			if err != nil {
				log.Warn("wizard-gateway: shutdown past its grace", "err", err)
			}
			<-served
			nerr := node.Shutdown(ctx)
			cancel()
			return errors.Join(err, nerr)
		}
	}
}

// reload applies the file again (see [gateway.Gateway.Reload]) and
// returns the configuration now in force: a bad file changes nothing and
// the log says why; settings that only a restart changes keep their old
// values and the log names them.
func reload(g *gateway.Gateway, f *flags, was *config.Config, log *slog.Logger) *config.Config {
	cfg, err := config.Load(f.config)
	var restart []string
	if err == nil {
		applyMeshFlags(&cfg.Mesh, f)
		restart, err = g.Reload(cfg)
	}
	if err != nil {
		log.Error("wizard-gateway: reload failed; nothing changed", "file", f.config, "err", err)
		return was
	}
	restart = slices.DeleteFunc(restart, func(s string) bool { return s == "server.listen" && sameListen(was, cfg, f) })
	restart = append(restart, processRestart(was, cfg)...)
	if len(restart) > 0 {
		log.Warn("wizard-gateway: needs a restart: "+strings.Join(restart, ", ")+"; they keep their old values, the rest is reloaded", "file", f.config, "needs_restart", restart)
	}
	log.Info("wizard-gateway: reloaded", "file", f.config, "routes", len(cfg.Table().Routes()))
	return cfg
}

// sameListen reports whether the listen address, with the flags over
// the file, is the same in both configurations.
func sameListen(was, now *config.Config, f *flags) bool {
	a, errA := listenAddr(was.Server.Listen, f.ip, f.port)
	b, errB := listenAddr(now.Server.Listen, f.ip, f.port)
	return errA == nil && errB == nil && a == b
}

// processRestart names the program's settings, made once at start, that
// differ from was to now: the mesh node and the log's format and output.
func processRestart(was, now *config.Config) []string {
	var out []string
	if meshOf(&was.Mesh) != meshOf(&now.Mesh) {
		out = append(out, "mesh")
	}
	if was.AccessLog.Format != now.AccessLog.Format {
		out = append(out, "access_log.format")
	}
	if was.AccessLog.Output != now.AccessLog.Output {
		out = append(out, "access_log.output")
	}
	return out
}

// meshOf is the mesh section as one comparable text.
func meshOf(m *config.Mesh) string {
	tls := ""
	if m.TLS != nil {
		tls = m.TLS.CertFile + "\x00" + m.TLS.KeyFile + "\x00" + m.TLS.CAFile + "\x00" + m.TLS.ServerName
	}
	return fmt.Sprintf("%#v", []any{m.Transport, m.Listen, m.GossipListen, m.GossipAdvertise, m.Seeds, m.DNS, m.Peers, m.GossipKey, m.GossipKeyFile, m.Segment, tls, m.Insecure})
}

// listenAddr is server.listen with the --ip and --port flags over it.
func listenAddr(listen, ip, port string) (string, error) {
	host, p, err := net.SplitHostPort(listen)
	if err != nil {
		return "", fmt.Errorf("server.listen %q: %w", listen, err)
	}
	if ip != "" {
		if net.ParseIP(ip) == nil {
			return "", fmt.Errorf("--ip %q is not an IP address", ip)
		}
		host = ip
	}
	if port != "" {
		p = port
	}
	return net.JoinHostPort(host, p), nil
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(strings.ToUpper(s))); err != nil {
		return 0, fmt.Errorf("--log-level %q: want debug, info, warn or error", s)
	}
	return l, nil
}

// newLogger logs at level, as the access_log section says: json or
// text, to stderr, stdout or a file (appended to).
func newLogger(a config.AccessLog, level slog.Level, stderr io.Writer) (*slog.Logger, io.Closer, error) {
	var w io.Writer = stderr
	var closer io.Closer = io.NopCloser(nil)
	switch a.Output {
	case "", "stderr":
	case "stdout":
		w = os.Stdout
	default:
		f, err := os.OpenFile(a.Output, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			return nil, nil, fmt.Errorf("access_log.output: %w", err)
		}
		w, closer = f, f
	}
	o := &slog.HandlerOptions{Level: level}
	if a.Format == "text" {
		return slog.New(slog.NewTextHandler(w, o)), closer, nil
	}
	return slog.New(slog.NewJSONHandler(w, o)), closer, nil
}
