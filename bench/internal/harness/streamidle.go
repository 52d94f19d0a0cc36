package harness

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"time"
)

// measureIdle starts a server process of contender s, connects to it and
// opens n idle streams, and measures what they add to each side, per
// stream: goroutines, live heap and goroutine stacks, each side's read
// after a collection once the server holds every stream open, against the
// same read before. With a profile directory, both sides record every
// allocation meanwhile and write their heap profiles there with the
// streams open (idle-client-NAME.pprof, idle-server-NAME.pprof).
func measureIdle(ctx context.Context, s streamer, n int, profileDir string, stderr io.Writer) (IdleRow, error) {
	row := IdleRow{Name: s.name, Contender: s.title, Streams: n}
	if profileDir != "" {
		if err := os.MkdirAll(profileDir, 0o755); err != nil {
			return row, err
		}
		rate := runtime.MemProfileRate
		runtime.MemProfileRate = 1
		defer func() { runtime.MemProfileRate = rate }()
	}
	ch, err := startChild(ctx, ServerSpec{Contender: s.name, Role: RoleStream, Listen: "127.0.0.1:0", MemProfileAll: profileDir != ""}, stderr)
	if err != nil {
		return row, err
	}
	defer ch.stop()
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	c, err := s.dial(dctx, ch.addr)
	cancel()
	if err != nil {
		return row, err
	}
	defer c.Close()
	// One stream first, so that the connection is up and its buffers
	// are in the baseline.
	one, err := c.Start(ctx, 1, 0, nil)
	if err == nil {
		err = waitOpenStreams(ctx, ch, 1)
	}
	if err != nil {
		return row, err
	}
	defer one.Stop()
	s0, err := ch.mem(ctx)
	if err != nil {
		return row, err
	}
	c0 := readMem()
	run, err := c.Start(ctx, n, 0, nil)
	if err != nil {
		return row, err
	}
	err = waitOpenStreams(ctx, ch, n+1)
	var s1, c1 MemStats
	if err == nil {
		c1 = readMem()
		s1, err = ch.mem(ctx)
	}
	if err == nil && profileDir != "" {
		err = idleHeaps(ctx, ch, profileDir, s.name)
	}
	if serr := run.Stop(); err == nil {
		err = serr
	}
	if err == nil {
		err = waitOpenStreams(ctx, ch, 1)
	}
	row.Server, row.Client = idleCost(s0, s1, n), idleCost(c0, c1, n)
	return row, err
}

// idleCost is what n streams added between before and after, per stream.
func idleCost(before, after MemStats, n int) IdleCost {
	per := func(a, b uint64) float64 { return (float64(b) - float64(a)) / float64(n) }
	return IdleCost{
		Goroutines: float64(after.Goroutines-before.Goroutines) / float64(n),
		Heap:       per(before.HeapAlloc, after.HeapAlloc),
		Stack:      per(before.StackInuse, after.StackInuse),
	}
}

// waitOpenStreams waits until the server process ch has n streams open.
func waitOpenStreams(ctx context.Context, ch *child, n int) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		open, err := ch.openStreams(ctx)
		if err != nil {
			return err
		}
		if open == int64(n) {
			return nil
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return fmt.Errorf("the server has %d streams open, want %d: %w", open, n, ctx.Err())
		}
	}
}

// idleHeaps writes the heap profiles of this process and of the server
// process ch into dir.
func idleHeaps(ctx context.Context, ch *child, dir, name string) error {
	if err := writeHeap(filepath.Join(dir, "idle-client-"+name+".pprof")); err != nil {
		return err
	}
	path, err := filepath.Abs(filepath.Join(dir, "idle-server-"+name+".pprof"))
	if err != nil {
		return err
	}
	l, err := ch.Ask(ctx, queryHeap+path, 30*time.Second)
	if err != nil {
		return err
	}
	if l != answerHeap+"ok" {
		return fmt.Errorf("%s: %s", ch.Name(), l)
	}
	return nil
}

// writeHeap collects garbage and writes this process's heap profile into
// path.
func writeHeap(path string) error {
	runtime.GC()
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.WriteHeapProfile(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// writeAllocs writes the allocation profile of this process into
// dir/name.
func writeAllocs(dir, name string, logf func(string, ...any)) {
	f, err := os.Create(filepath.Join(dir, name))
	if err == nil {
		err = pprof.Lookup("allocs").WriteTo(f, 0)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil && logf != nil {
		logf("allocation profile %s: %v", name, err)
	}
}
