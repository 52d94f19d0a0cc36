package swim

import (
	"errors"
	"fmt"
	"log"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/memberlist"
)

// transport is memberlist's network transport (UDP for probes and gossip,
// TCP for joins and state syncs, on one port), written again for one
// difference: memberlist's own reads every UDP packet into a fresh 64 KiB
// buffer, while this one reads into a reused buffer and copies out only
// the packet. With fast timings and many members in one process, those
// buffers were most of gossip's cost and starved probes into false
// failures.
type transport struct {
	tcp    *net.TCPListener
	udp    *net.UDPConn
	port   int
	log    *log.Logger
	packet chan *memberlist.Packet
	stream chan net.Conn
	closed atomic.Bool
	wg     sync.WaitGroup

	// blocked, when set, says which gossip addresses ("ip:port") this
	// transport cannot reach, as if the network dropped everything to and
	// from them: a test's partition. Unset, it costs one atomic load per
	// packet and dial.
	blocked atomic.Pointer[func(addr string) bool]
}

var _ memberlist.NodeAwareTransport = (*transport)(nil)

const (
	maxPacket     = 65536           // the largest UDP payload
	udpReadBuffer = 2 * 1024 * 1024 // socket receive buffer asked for, as memberlist does
)

// newTransport listens on ip:port for TCP and UDP; port 0 takes a free
// port that both protocols can have.
func newTransport(ip net.IP, port int, logger *log.Logger) (*transport, error) {
	tries := 1
	if port == 0 {
		tries = 10
	}
	var err error
	for range tries {
		var t *transport
		if t, err = listen(ip, port); err == nil {
			t.log = logger
			t.packet = make(chan *memberlist.Packet)
			t.stream = make(chan net.Conn)
			t.wg.Add(2)
			go t.acceptStreams()
			go t.readPackets()
			return t, nil
		}
		if !errors.Is(err, syscall.EADDRINUSE) {
			break
		}
	}
	return nil, err
}

func listen(ip net.IP, port int) (*transport, error) {
	tcp, err := net.ListenTCP("tcp", &net.TCPAddr{IP: ip, Port: port})
	if err != nil {
		return nil, err
	}
	port = tcp.Addr().(*net.TCPAddr).Port
	udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: ip, Port: port})
	if err != nil {
		tcp.Close()
		return nil, err
	}
	for size := udpReadBuffer; size > 0; size /= 2 {
		if udp.SetReadBuffer(size) == nil {
			break
		}
	}
	return &transport{tcp: tcp, udp: udp, port: port}, nil
}

// FinalAdvertiseAddr returns the address to advertise: ip if given, else
// the bound address, or a private address of this host when bound to all
// interfaces.
func (t *transport) FinalAdvertiseAddr(ip string, port int) (net.IP, int, error) {
	if port == 0 {
		port = t.port
	}
	if ip != "" {
		a := net.ParseIP(ip)
		if a == nil {
			return nil, 0, fmt.Errorf("advertise address %q is not an IP address", ip)
		}
		if a4 := a.To4(); a4 != nil {
			a = a4
		}
		return a, port, nil
	}
	bound := t.tcp.Addr().(*net.TCPAddr).IP
	if !bound.IsUnspecified() {
		return bound, port, nil
	}
	a, err := privateIP()
	return a, port, err
}

// privateIP returns the first private (RFC 1918, RFC 4193) address of
// the host's interfaces that are up, IPv4 first.
func privateIP() (net.IP, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	var v6 net.IP
	for _, i := range ifs {
		if i.Flags&net.FlagUp == 0 || i.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, err := i.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			n, ok := a.(*net.IPNet)
			if !ok || !n.IP.IsPrivate() {
				continue
			}
			if v4 := n.IP.To4(); v4 != nil {
				return v4, nil
			}
			if v6 == nil {
				v6 = n.IP
			}
		}
	}
	if v6 != nil {
		return v6, nil
	}
	return nil, errors.New("no private address on this host's interfaces: bind to one or set WithAdvertiseAddr")
}

func (t *transport) WriteTo(b []byte, addr string) (time.Time, error) {
	return t.WriteToAddress(b, memberlist.Address{Addr: addr})
}

func (t *transport) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	if t.isBlocked(a.Addr) {
		return time.Now(), nil // lost on the way, as UDP may be
	}
	// memberlist hands out "ip:port": parsed into a netip.AddrPort, it is
	// sent without an allocation. Anything else takes the slow path.
	if ap, err := netip.ParseAddrPort(a.Addr); err == nil {
		_, err = t.udp.WriteToUDPAddrPort(b, ap)
		return time.Now(), err
	}
	host, port, err := net.SplitHostPort(a.Addr)
	if err != nil {
		return time.Time{}, err
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return time.Time{}, fmt.Errorf("bad port in %q", a.Addr)
	}
	ip := net.ParseIP(host)
	if ip == nil { // a name is resolved
		u, err := net.ResolveUDPAddr("udp", a.Addr)
		if err != nil {
			return time.Time{}, err
		}
		ip = u.IP
	}
	_, err = t.udp.WriteToUDP(b, &net.UDPAddr{IP: ip, Port: int(p)})
	return time.Now(), err
}

func (t *transport) PacketCh() <-chan *memberlist.Packet { return t.packet }
func (t *transport) StreamCh() <-chan net.Conn           { return t.stream }

func (t *transport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	return t.DialAddressTimeout(memberlist.Address{Addr: addr}, timeout)
}

func (t *transport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	if t.isBlocked(a.Addr) {
		return nil, fmt.Errorf("dial tcp %s: %w", a.Addr, errBlocked)
	}
	d := net.Dialer{Timeout: timeout}
	return d.Dial("tcp", a.Addr)
}

// errBlocked is the error of a dial to an address a test's partition
// blocks.
var errBlocked = errors.New("blocked by a test's partition")

// block makes the addresses f reports unreachable from and to this
// transport (UDP sent or received, TCP dialled), until block(nil). A
// stream another node dials in is not refused: its source port is not its
// gossip port, so a partition blocks dials on both sides instead.
func (t *transport) block(f func(addr string) bool) {
	if f == nil {
		t.blocked.Store(nil)
		return
	}
	t.blocked.Store(&f)
}

// isBlocked says whether a test's partition blocks addr.
func (t *transport) isBlocked(addr string) bool {
	f := t.blocked.Load()
	return f != nil && (*f)(addr)
}

// Shutdown closes the listeners and waits for their goroutines. memberlist
// calls it first when it shuts down, while it still takes packets and
// streams.
func (t *transport) Shutdown() error {
	if t.closed.Swap(true) {
		return nil
	}
	t.tcp.Close()
	t.udp.Close()
	t.wg.Wait()
	return nil
}

func (t *transport) acceptStreams() {
	defer t.wg.Done()
	const first, longest = 5 * time.Millisecond, time.Second
	delay := time.Duration(0)
	for {
		c, err := t.tcp.AcceptTCP()
		if err != nil {
			if t.closed.Load() {
				return
			}
			delay = min(max(2*delay, first), longest)
			t.log.Printf("[ERR] memberlist: Error accepting TCP connection: %v", err)
			time.Sleep(delay) // accept keeps failing (out of descriptors): back off
			continue
		}
		delay = 0
		t.stream <- c
	}
}

func (t *transport) readPackets() {
	defer t.wg.Done()
	buf := make([]byte, maxPacket)
	for {
		n, from, err := t.udp.ReadFrom(buf)
		now := time.Now()
		if err != nil {
			if t.closed.Load() {
				return
			}
			t.log.Printf("[ERR] memberlist: Error reading UDP packet: %v", err)
			continue
		}
		if n < 1 {
			continue
		}
		if f := t.blocked.Load(); f != nil && (*f)(from.String()) {
			continue // a test's partition
		}
		t.packet <- &memberlist.Packet{Buf: slices.Clone(buf[:n]), From: from, Timestamp: now}
	}
}
