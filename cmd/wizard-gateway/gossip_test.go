package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/swim"
	"github.com/wizardmesh/wizard/runtime/tcp"
)

// TestServeGossip: the gateway joins a mesh by gossip (--gossip, --seeds)
// and calls a pattern of a member it learnt of.
func TestServeGossip(t *testing.T) {
	discard := slog.New(slog.DiscardHandler)
	d, err := swim.New(swim.WithBindAddr("127.0.0.1:0"), swim.WithPreset(swim.Fast), swim.WithLogger(discard))
	if err != nil {
		t.Fatal(err)
	}
	tr, _ := tcp.New(tcp.WithLogger(discard))
	svc, err := runtime.New(runtime.WithTransport(tr), runtime.WithListen("127.0.0.1:0"), runtime.WithDiscovery(d), runtime.WithLogger(discard))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	svc.Add("role:t,cmd:echo", func(ctx context.Context, req runtime.Request) (any, error) { return req.Msg(), nil })

	cfgFile := filepath.Join(t.TempDir(), "gateway.yaml")
	os.WriteFile(cfgFile, []byte("routes:\n  - {method: GET, path: /echo, pattern: \"role:t,cmd:echo\"}\n"), 0o600)
	sigs := make(chan os.Signal, 1)
	addrs := make(chan string, 1)
	done := make(chan int, 1)
	var stderr syncBuffer
	go func() {
		done <- run([]string{"-c", cfgFile, "-i", "127.0.0.1", "-p", "0", "--listen-mesh", "127.0.0.1:0", "--gossip", "127.0.0.1:0", "--seeds", d.GossipAddr()}, noEnv, io.Discard, &stderr, sigs, func(a string) { addrs <- a })
	}()
	var base string
	select {
	case a := <-addrs:
		base = "http://" + a
	case code := <-done:
		t.Fatalf("exited %d: %s", code, stderr.String())
	case <-time.After(guard):
		t.Fatal("never served")
	}
	until(t, "GET /echo answers 200 through gossip", func() bool {
		res, err := http.Get(base + "/echo")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == 200
	})
	sigs <- syscall.SIGTERM
	if code := <-done; code != 0 {
		t.Errorf("exit %d: %s", code, stderr.String())
	}
}
