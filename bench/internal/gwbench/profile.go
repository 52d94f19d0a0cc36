package gwbench

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	goruntime "runtime"
	"runtime/pprof"
	"strings"

	wizardgw "github.com/wizardmesh/wizard/gateway"
	"github.com/wizardmesh/wizard/gateway/config"
	wizard "github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/tcp"
)

// roleProfGateway is package gateway's Gateway in this binary, set up as
// cmd/wizard-gateway sets it up (a node over TCP with the config's static
// peers, gateway.New, Serve), with a CPU profile over its life and a heap
// profile when asked: what the profile mode measures instead of the
// binary, which serves no profiles.
const roleProfGateway = "prof-gateway"

// The control lines of a profiled gateway: the parent writes one, the
// child answers "ok" or an error on one line.
const (
	queryHeap = "heap" // write heap.pprof and goroutines.txt into the profile directory
)

// serveProfGateway serves s.Config (a file) and profiles into s.Dir.
func serveProfGateway(s childSpec, in io.Reader, out io.Writer) error {
	// The parent's stop sends SIGINT after closing stdin: the end of stdin
	// stops this process, so that the CPU profile is written.
	signal.Ignore(os.Interrupt)
	cfg, err := config.Load(s.Config)
	if err != nil {
		return err
	}
	stop, err := startCPUProfile(s.Dir)
	if err != nil {
		return err
	}
	defer stop()
	t, err := tcp.New()
	if err != nil {
		return err
	}
	quiet := slog.New(slog.DiscardHandler)
	node, err := wizard.New(wizard.WithTransport(t), wizard.WithListen(cfg.Mesh.Listen), wizard.WithLogger(quiet),
		wizard.WithDiscovery(wizard.StaticPeers(cfg.Mesh.Peers...)))
	if err != nil {
		return err
	}
	defer node.Close()
	g, err := wizardgw.New(node, cfg, wizardgw.WithLogger(quiet))
	if err != nil {
		return err
	}
	defer g.Close()
	ln, err := net.Listen("tcp", cfg.Server.Listen)
	if err != nil {
		return err
	}
	go g.Serve(ln)
	if _, err := fmt.Fprintln(out, ln.Addr().String()); err != nil {
		return err
	}
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		answer := "ok"
		switch strings.TrimSpace(sc.Text()) {
		case queryHeap:
			if err := writeHeap(s.Dir); err != nil {
				answer = err.Error()
			}
		default:
			answer = "unknown query " + sc.Text()
		}
		if _, err := fmt.Fprintln(out, answer); err != nil {
			return err
		}
	}
	return sc.Err()
}

// startCPUProfile profiles this process's CPU into dir/cpu.pprof until
// stop.
func startCPUProfile(dir string) (stop func(), err error) {
	f, err := os.Create(filepath.Join(dir, "cpu.pprof"))
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

func writeHeap(dir string) error {
	goruntime.GC()
	for name, file := range map[string]string{"heap": "heap.pprof", "goroutine": "goroutines.txt"} {
		f, err := os.Create(filepath.Join(dir, file))
		if err != nil {
			return err
		}
		debug := 0
		if name == "goroutine" {
			debug = 1
		}
		err = pprof.Lookup(name).WriteTo(f, debug)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	var ms goruntime.MemStats
	goruntime.ReadMemStats(&ms)
	return os.WriteFile(filepath.Join(dir, "memstats.txt"), fmt.Appendf(nil,
		"goroutines %d\nHeapAlloc %d\nHeapInuse %d\nHeapIdle %d\nHeapReleased %d\nStackInuse %d\nSys %d\nNumGC %d\n",
		goruntime.NumGoroutine(), ms.HeapAlloc, ms.HeapInuse, ms.HeapIdle, ms.HeapReleased, ms.StackInuse, ms.Sys, ms.NumGC), 0o644)
}
