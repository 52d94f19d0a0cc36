//go:build linux

package faultnet_test

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/wizardmesh/wizard/runtime/internal/testkit/faultnet"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
)

// udpPair opens a UDP socket on each of two hosts, port 9000, and
// returns them; the test closes them.
func udpPair(t *testing.T, h *faultnet.Hub, a, b *faultnet.Host) (ca, cb *net.UDPConn) {
	t.Helper()
	listen := func(host *faultnet.Host) *net.UDPConn {
		var c *net.UDPConn
		err := h.Do(host, func() error {
			var err error
			c, err = net.ListenUDP("udp4", &net.UDPAddr{IP: host.Addr.AsSlice(), Port: 9000})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	return listen(a), listen(b)
}

// counter counts the datagrams c receives, in a goroutine, until c closes.
func counter(c *net.UDPConn) *atomic.Int64 {
	var n atomic.Int64
	go func() {
		buf := make([]byte, 2048)
		for {
			if _, _, err := c.ReadFromUDP(buf); err != nil {
				return
			}
			n.Add(1)
		}
	}()
	return &n
}

// send sends count datagrams from c to the host b's port 9000, in
// batches that wait for the hub's counters (and the receiver, for what
// was forwarded) to catch up, so that no socket buffer overflows.
func send(t *testing.T, h *faultnet.Hub, a, b *faultnet.Host, c *net.UDPConn, got *atomic.Int64, count int) {
	t.Helper()
	to := &net.UDPAddr{IP: b.Addr.AsSlice(), Port: 9000}
	for sent := 0; sent < count; {
		before := h.Counts(a, b)
		batch := min(50, count-sent)
		for range batch {
			if _, err := c.WriteToUDP([]byte("ping"), to); err != nil {
				t.Fatal(err)
			}
		}
		sent += batch
		testwait.Until(t, "the hub and the receiver to catch up", func() bool {
			now := h.Counts(a, b)
			return now.Forwarded+now.Dropped == before.Forwarded+before.Dropped+uint64(batch) && got.Load() == int64(now.Forwarded)
		})
	}
}

// TestLoss: with 20% loss one way, the hub drops 20% (± 3 points) of
// 2000 datagrams that way, every forwarded one arrives, and the other
// way loses none.
func TestLoss(t *testing.T) {
	h := faultnet.New(t, 2)
	a, b := h.Host(0), h.Host(1)
	h.Set(a, b, faultnet.Rule{Loss: 0.2})
	ca, cb := udpPair(t, h, a, b)
	gotB, gotA := counter(cb), counter(ca)
	send(t, h, a, b, ca, gotB, 2000)
	send(t, h, b, a, cb, gotA, 500)
	ab, ba := h.Counts(a, b), h.Counts(b, a)
	rate := float64(ab.Dropped) / 2000
	t.Logf("a→b %+v (loss %.3f), b→a %+v", ab, rate, ba)
	if rate < 0.17 || rate > 0.23 {
		t.Errorf("loss a→b = %.3f, want 0.20 ± 0.03", rate)
	}
	if ba.Dropped != 0 || ba.Forwarded != 500 {
		t.Errorf("b→a = %+v, want 500 forwarded, none dropped", ba)
	}
}

// rtt returns the shortest of five round trips of a datagram from ca to
// an echo on cb.
func rtt(t *testing.T, ca, cb *net.UDPConn) time.Duration {
	t.Helper()
	go func() {
		buf := make([]byte, 2048)
		for range 5 {
			n, from, err := cb.ReadFromUDP(buf)
			if err != nil {
				return
			}
			cb.WriteToUDP(buf[:n], from)
		}
	}()
	best := time.Duration(1 << 62)
	buf := make([]byte, 2048)
	for range 5 {
		start := time.Now()
		if _, err := ca.WriteToUDP([]byte("ping"), cb.LocalAddr().(*net.UDPAddr)); err != nil {
			t.Fatal(err)
		}
		ca.SetReadDeadline(time.Now().Add(testwait.Guard))
		if _, _, err := ca.ReadFromUDP(buf); err != nil {
			t.Fatal(err)
		}
		best = min(best, time.Since(start))
	}
	return best
}

// TestDelay: 50 ms ± 10 ms one way adds at least 35 ms to a round trip
// (and less than a second: the delay is not compounded).
func TestDelay(t *testing.T) {
	h := faultnet.New(t, 2)
	a, b := h.Host(0), h.Host(1)
	ca, cb := udpPair(t, h, a, b)
	base := rtt(t, ca, cb)
	h.Set(b, a, faultnet.Rule{Delay: 50 * time.Millisecond, Jitter: 10 * time.Millisecond})
	delayed := rtt(t, ca, cb)
	t.Logf("round trip %v, with 50±10 ms one way %v", base, delayed)
	if added := delayed - base; added < 35*time.Millisecond || delayed > time.Second {
		t.Errorf("round trip %v → %v; want 35 ms to 1 s added", base, delayed)
	}
}

// TestPartition: a partition drops everything both ways, a one-way drop
// only its way, and Heal forwards again; a TCP connection across the hub
// works before and after.
func TestPartition(t *testing.T) {
	h := faultnet.New(t, 3)
	a, b, c := h.Host(0), h.Host(1), h.Host(2)
	ca, cb := udpPair(t, h, a, b)
	gotB, gotA := counter(cb), counter(ca)

	h.Isolate(b)
	send(t, h, a, b, ca, gotB, 20)
	send(t, h, b, a, cb, gotA, 20)
	if ab, ba := h.Counts(a, b), h.Counts(b, a); ab.Forwarded != 0 || ba.Forwarded != 0 || gotA.Load()+gotB.Load() != 0 {
		t.Fatalf("isolated: a→b %+v, b→a %+v, received %d, %d; want nothing through", ab, ba, gotB.Load(), gotA.Load())
	}
	if bc := h.Counts(b, c); bc.Forwarded != 0 {
		t.Errorf("b→c forwarded %d while b was isolated", bc.Forwarded)
	}

	h.Heal()
	h.Set(a, b, faultnet.Rule{Drop: true}) // one way
	send(t, h, a, b, ca, gotB, 20)
	send(t, h, b, a, cb, gotA, 20)
	if gotB.Load() != 0 || gotA.Load() != 20 {
		t.Fatalf("a→b dropped: received a→b %d, b→a %d; want 0, 20", gotB.Load(), gotA.Load())
	}

	h.Heal()
	send(t, h, a, b, ca, gotB, 20)
	if gotB.Load() != 20 {
		t.Fatalf("healed: received a→b %d, want 20", gotB.Load())
	}
	tcpEcho(t, h, a, c)
}

// tcpEcho connects from a to c over TCP and echoes a line.
func tcpEcho(t *testing.T, h *faultnet.Hub, a, c *faultnet.Host) {
	t.Helper()
	var ln net.Listener
	if err := h.Do(c, func() (err error) { ln, err = net.Listen("tcp4", c.Addr.String()+":9001"); return err }); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		buf := make([]byte, 64)
		n, _ := conn.Read(buf)
		conn.Write(buf[:n])
	}()
	var conn net.Conn
	if err := h.Do(a, func() (err error) {
		conn, err = net.DialTimeout("tcp4", c.Addr.String()+":9001", testwait.Guard)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(testwait.Guard))
	if _, err := conn.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	n, err := conn.Read(buf)
	if err != nil || string(buf[:n]) != "hello" {
		t.Fatalf("echo = %q, %v", buf[:n], err)
	}
}

// TestReorder: with every other packet held back, datagrams arrive out
// of the order they were sent in.
func TestReorder(t *testing.T) {
	h := faultnet.New(t, 2)
	a, b := h.Host(0), h.Host(1)
	h.Set(a, b, faultnet.Rule{Reorder: 0.5, ReorderBy: 20 * time.Millisecond})
	ca, cb := udpPair(t, h, a, b)
	to := cb.LocalAddr().(*net.UDPAddr)
	for i := range 20 {
		if _, err := ca.WriteToUDP([]byte{byte(i)}, to); err != nil {
			t.Fatal(err)
		}
	}
	var order []byte
	buf := make([]byte, 16)
	cb.SetReadDeadline(time.Now().Add(testwait.Guard))
	for range 20 {
		if _, _, err := cb.ReadFromUDP(buf); err != nil {
			t.Fatal(err)
		}
		order = append(order, buf[0])
	}
	if slices.IsSorted(order) {
		t.Errorf("received in order %v; want some reordered", order)
	}
}

// TestCleanup: when the test that made a hub ends, its namespaces are
// gone and the process it started inside is dead; a namespace left by a
// process that no longer runs is removed by the next New.
func TestCleanup(t *testing.T) {
	faultnet.Require(t)
	var names []string
	var pid int
	t.Run("hub", func(t *testing.T) {
		h := faultnet.New(t, 2)
		for _, host := range h.Hosts() {
			names = append(names, host.Name)
		}
		cmd := exec.Command("sleep", "600")
		if err := h.Start(h.Host(1), cmd); err != nil {
			t.Fatal(err)
		}
		pid = cmd.Process.Pid
		go cmd.Wait() // reaps it once killed
		if _, err := os.Stat("/run/netns/" + names[0]); err != nil {
			t.Fatalf("the namespace is not there: %v", err)
		}
	})
	for _, n := range names {
		if _, err := os.Stat("/run/netns/" + n); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("namespace %s left behind (%v)", n, err)
		}
	}
	testwait.Until(t, "the process started in the hub to die", func() bool {
		return syscall.Kill(pid, 0) == syscall.ESRCH
	})

	// A namespace named for a pid that runs no more: a run killed outright.
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	stale := fmt.Sprintf("%s%d-1-0", faultnet.Prefix, dead.Process.Pid)
	if out, err := exec.Command("ip", "netns", "add", stale).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, strings.TrimSpace(string(out))) // Require found root and ip
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", stale).Run() })
	faultnet.New(t, 1)
	if _, err := os.Stat("/run/netns/" + stale); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stale namespace %s not removed (%v)", stale, err)
	}
}
