//go:build linux

package faultnet

import (
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// open holds the hubs not closed yet, for the signal handler.
var open struct {
	sync.Mutex
	hubs map[*Hub]bool
}

func register(h *Hub) {
	open.Lock()
	defer open.Unlock()
	if open.hubs == nil {
		open.hubs = make(map[*Hub]bool)
	}
	open.hubs[h] = true
}

func unregister(h *Hub) {
	open.Lock()
	defer open.Unlock()
	delete(open.hubs, h)
}

var signalOnce sync.Once

// installSignalHandler makes a SIGINT or SIGTERM of the test process
// close every open hub, then die of the signal as it would have.
func installSignalHandler() {
	signalOnce.Do(func() {
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
		go func() {
			sig := <-ch
			open.Lock()
			hubs := make([]*Hub, 0, len(open.hubs))
			for h := range open.hubs {
				hubs = append(hubs, h)
			}
			open.Unlock()
			for _, h := range hubs {
				h.Close()
			}
			signal.Reset(sig)
			syscall.Kill(os.Getpid(), sig.(syscall.Signal))
		}()
	})
}

// removeStale removes the namespaces of hubs whose process no longer
// runs: what a run killed outright (SIGKILL) left behind.
func removeStale(t testing.TB) {
	for _, name := range namespaces() {
		pid, ok := ownerPid(name)
		if !ok || pid == os.Getpid() || syscall.Kill(pid, 0) != syscall.ESRCH {
			continue
		}
		t.Logf("faultnet: removing stale namespace %s", name)
		removeNamespace(name)
	}
}

// namespaces lists the named network namespaces with the hub's prefix.
func namespaces() []string {
	entries, err := os.ReadDir("/run/netns")
	if err != nil {
		return nil
	}
	var names []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), Prefix) {
			names = append(names, e.Name())
		}
	}
	return names
}

// ownerPid parses the pid out of a hub's namespace name.
func ownerPid(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, Prefix)
	if !ok {
		return 0, false
	}
	pidText, _, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, false
	}
	pid, err := strconv.Atoi(pidText)
	return pid, err == nil && pid > 0
}
