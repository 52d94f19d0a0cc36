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
	"time"
)

// open holds the hubs not closed yet, for the signal handler.
var open struct {
	sync.Mutex
	hubs  map[*Hub]bool
	dying bool // a signal closed them all: no more
}

// register adds h to the open hubs, or reports false once a signal has
// closed them.
func register(h *Hub) bool {
	open.Lock()
	defer open.Unlock()
	if open.dying {
		return false
	}
	if open.hubs == nil {
		open.hubs = make(map[*Hub]bool)
	}
	open.hubs[h] = true
	return true
}

func unregister(h *Hub) {
	open.Lock()
	defer open.Unlock()
	delete(open.hubs, h)
}

var signalOnce sync.Once

// installSignalHandler makes a SIGINT or SIGTERM of the test process
// close every open hub, then die of the signal as it would have; where
// the signal was ignored (SIGINT in a background job), exit with status
// 128+signal instead, since the hubs are gone.
func installSignalHandler() {
	signalOnce.Do(func() {
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
		go func() {
			sig := (<-ch).(syscall.Signal)
			closeAll()
			signal.Reset(syscall.SIGINT, syscall.SIGTERM)
			syscall.Kill(os.Getpid(), sig)
			// The runtime's handler kills the process on another thread;
			// if it does not (the signal is ignored), exit after a while.
			time.Sleep(time.Second)
			os.Exit(128 + int(sig))
		}()
	})
}

// closeAll closes every open hub.
func closeAll() {
	open.Lock()
	hubs := make([]*Hub, 0, len(open.hubs))
	for h := range open.hubs {
		hubs = append(hubs, h)
	}
	open.hubs, open.dying = nil, true
	open.Unlock()
	for _, h := range hubs {
		h.Close()
	}
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
