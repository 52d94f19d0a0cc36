//go:build linux

package faultnet

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/wizardmesh/wizard/internal/testkit/need"
)

// Prefix starts the name of every namespace a Hub creates; the pid of the
// test process and a sequence number follow, so that the namespaces of a
// process that no longer runs are recognised as stale.
const Prefix = "wizfault-"

// Subnet is the test subnet: host i (from 0) has 10.77.0.(i+1).
var Subnet = netip.MustParsePrefix("10.77.0.0/24")

// Host is one host of a [Hub]: a network namespace with a TUN device.
type Host struct {
	// Name is the namespace's name, for `ip netns exec`.
	Name string
	// Addr is the host's address on its TUN device.
	Addr netip.Addr

	index int
	tun   *os.File
	rng   *rand.Rand // owned by the host's forwarding goroutine
}

// String returns the host's address.
func (h *Host) String() string { return h.Addr.String() }

// link is the state of one direction between two hosts.
type link struct {
	rule               atomic.Pointer[Rule]
	forwarded, dropped atomic.Uint64
}

// Hub connects the hosts it created and forwards their packets; see the
// package doc.
type Hub struct {
	hosts []*Host
	byIP  map[netip.Addr]*Host
	links [][]link // [from][to]

	mu     sync.Mutex
	closed bool
	pgids  []int // process groups of the processes it started

	wg sync.WaitGroup
}

var hubSeq atomic.Int64

// New creates n hosts (1 to 254) connected through a hub, removed when
// the test ends; it skips t (need.Skipf) without root, /dev/net/tun or
// the ip command, and fails it when the hosts cannot be made.
func New(t testing.TB, n int) *Hub {
	t.Helper()
	if n < 1 || n > 254 {
		t.Fatalf("faultnet.New: %d hosts, want 1 to 254", n)
	}
	Require(t)
	installSignalHandler()
	removeStale(t)
	h := &Hub{byIP: make(map[netip.Addr]*Host, n), links: make([][]link, n)}
	for i := range h.links {
		h.links[i] = make([]link, n)
	}
	seq := hubSeq.Add(1)
	if !register(h) {
		t.Fatal("faultnet: the test process is ending on a signal")
	}
	t.Cleanup(h.Close)
	addr := Subnet.Addr()
	for i := range n {
		addr = addr.Next()
		host := &Host{
			Name:  fmt.Sprintf("%s%d-%d-%d", Prefix, os.Getpid(), seq, i),
			Addr:  addr,
			index: i,
			rng:   rand.New(rand.NewPCG(uint64(seq), uint64(i))),
		}
		h.hosts = append(h.hosts, host) // before it exists, so Close removes a half-made one
		if err := h.makeHost(host); err != nil {
			t.Fatalf("faultnet: host %s: %v", host.Name, err)
		}
		h.byIP[addr] = host
	}
	for _, host := range h.hosts {
		h.wg.Add(1)
		go h.forward(host)
	}
	return h
}

// Require skips t (need.Skipf) unless the machine has what a Hub needs:
// root, /dev/net/tun and the ip command.
func Require(t testing.TB) {
	t.Helper()
	if why := missing(); why != "" {
		need.Skipf(t, "faultnet needs %s", why)
	}
}

// missing says what the machine lacks for a Hub, or "".
func missing() string {
	var why []string
	if os.Geteuid() != 0 {
		why = append(why, "root (network namespaces)")
	}
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		why = append(why, "/dev/net/tun")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		why = append(why, "the ip command (iproute2)")
	}
	return strings.Join(why, ", ")
}

// makeHost creates host's namespace and TUN device, with the address up.
func (h *Hub) makeHost(host *Host) error {
	if err := ip("netns", "add", host.Name); err != nil {
		return err
	}
	tun, err := openTUN(host.Name, "tun0")
	if err != nil {
		return err
	}
	host.tun = tun
	prefix := netip.PrefixFrom(host.Addr, Subnet.Bits()).String()
	for _, args := range [][]string{
		{"link", "set", "lo", "up"},
		{"addr", "add", prefix, "dev", "tun0"},
		{"link", "set", "tun0", "up"},
	} {
		if err := ip(append([]string{"-n", host.Name}, args...)...); err != nil {
			return err
		}
	}
	return nil
}

// ip runs the ip command with args.
func ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Hosts returns the hosts, in the order of their addresses.
func (h *Hub) Hosts() []*Host { return h.hosts }

// Host returns host i, from 0 (address 10.77.0.(i+1)).
func (h *Hub) Host(i int) *Host { return h.hosts[i] }

// Set sets the rule of the direction from → to.
func (h *Hub) Set(from, to *Host, r Rule) {
	h.links[from.index][to.index].rule.Store(&r)
}

// SetBoth sets the rule of both directions between a and b.
func (h *Hub) SetBoth(a, b *Host, r Rule) {
	h.Set(a, b, r)
	h.Set(b, a, r)
}

// SetAll sets the rule of every direction between any two hosts.
func (h *Hub) SetAll(r Rule) {
	for _, a := range h.hosts {
		for _, b := range h.hosts {
			if a != b {
				h.Set(a, b, r)
			}
		}
	}
}

// Partition drops every packet between hosts of different groups, both
// ways; the rules within a group, and of hosts in no group, stay.
func (h *Hub) Partition(groups ...[]*Host) {
	for i, g := range groups {
		for _, o := range groups[i+1:] {
			for _, a := range g {
				for _, b := range o {
					h.SetBoth(a, b, Rule{Drop: true})
				}
			}
		}
	}
}

// Isolate drops every packet to and from host: a full partition of it.
func (h *Hub) Isolate(host *Host) {
	for _, o := range h.hosts {
		if o != host {
			h.SetBoth(host, o, Rule{Drop: true})
		}
	}
}

// Heal resets every direction to the zero Rule.
func (h *Hub) Heal() { h.SetAll(Rule{}) }

// Counts returns the packets of the direction from → to so far.
func (h *Hub) Counts(from, to *Host) Counts {
	l := &h.links[from.index][to.index]
	return Counts{Forwarded: l.forwarded.Load(), Dropped: l.dropped.Load()}
}

// forward reads src's packets until its TUN closes and forwards each by
// its destination address under the rule of its direction. A packet
// that is not IPv4, or is for an address no host has, is dropped
// (uncounted: the kernel's IPv6 chatter, say).
func (h *Hub) forward(src *Host) {
	defer h.wg.Done()
	buf := make([]byte, 1<<16)
	for {
		n, err := src.tun.Read(buf)
		if err != nil {
			return // closed
		}
		pkt := buf[:n]
		if n < 20 || pkt[0]>>4 != 4 {
			continue
		}
		dst := h.byIP[netip.AddrFrom4([4]byte(pkt[16:20]))]
		if dst == nil || dst == src {
			continue
		}
		l := &h.links[src.index][dst.index]
		var r Rule
		if p := l.rule.Load(); p != nil {
			r = *p
		}
		drop, delay := r.verdict(src.rng)
		if drop {
			l.dropped.Add(1)
			continue
		}
		l.forwarded.Add(1)
		if delay == 0 {
			dst.tun.Write(pkt) // an error means the hub is closing
			continue
		}
		held := append([]byte(nil), pkt...)
		time.AfterFunc(delay, func() { dst.tun.Write(held) })
	}
}

// Start starts cmd inside host's namespace (through `ip netns exec`) in a
// process group of its own, which the kernel kills when the test process
// dies (Pdeathsig) and [Hub.Close] kills when the test ends. cmd must not
// be started; its Path and Args are run as given.
func (h *Hub) Start(host *Host, cmd *exec.Cmd) error {
	ipPath, err := exec.LookPath("ip")
	if err != nil {
		return err
	}
	cmd.Args = append([]string{"ip", "netns", "exec", host.Name, cmd.Path}, cmd.Args[1:]...)
	cmd.Path = ipPath
	cmd.Err = nil
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return errors.New("faultnet: the hub is closed")
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	h.pgids = append(h.pgids, cmd.Process.Pid)
	return nil
}

// Close kills the processes it started, closes the TUN devices and
// removes the namespaces. It is idempotent and safe from any goroutine.
func (h *Hub) Close() {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return
	}
	h.closed = true
	pgids := h.pgids
	h.mu.Unlock()
	unregister(h)
	for _, pg := range pgids {
		syscall.Kill(-pg, syscall.SIGKILL) // ESRCH: it ended already
	}
	for _, host := range h.hosts {
		if host.tun != nil {
			host.tun.Close()
		}
	}
	h.wg.Wait()
	for _, host := range h.hosts {
		removeNamespace(host.Name)
	}
}

// removeNamespace deletes a namespace, retrying briefly while processes
// killed in it are still going away.
func removeNamespace(name string) {
	for range 50 {
		if err := ip("netns", "del", name); err == nil {
			return
		}
		if _, err := os.Stat("/run/netns/" + name); errors.Is(err, os.ErrNotExist) {
			return
		}
		time.Sleep(20 * time.Millisecond) // a retry interval, not synchronisation
	}
}
