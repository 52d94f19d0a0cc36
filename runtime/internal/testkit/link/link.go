// Package link relays a transport's traffic to a target through a link a
// test can take down and bring up again: over TCP (connections cut, new
// ones refused while it is down) or UDP (datagrams dropped both ways
// while it is down, so QUIC connections go silent).
package link

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// Link relays to a target while it is up.
type Link interface {
	// Addr is the address to dial instead of the target's.
	Addr() string
	// Down cuts or silences the traffic on the link.
	Down()
	// Up lets traffic through again.
	Up()
}

// TCP relays TCP connections to target. While it is down, the
// connections relayed so far are closed and new ones are closed at once.
func TCP(t testing.TB, target string) Link { return NewTCP(t, target) }

// NewTCP is [TCP], with the relay's own methods.
func NewTCP(t testing.TB, target string) *TCPLink {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &TCPLink{l: l, target: target}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() {
		l.Close()
		p.Down()
		p.wg.Wait()
	})
	return p
}

// TCPLink relays TCP connections (see [TCP]).
type TCPLink struct {
	l      net.Listener
	target string
	wg     sync.WaitGroup

	mu    sync.Mutex
	down  bool
	conns []net.Conn
}

func (p *TCPLink) Addr() string { return p.l.Addr().String() }

func (p *TCPLink) Down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// Cut closes the connections relayed so far; new ones are relayed.
func (p *TCPLink) Cut() {
	p.Down()
	p.Up()
}

// Retarget makes the connections relayed from now on reach addr.
func (p *TCPLink) Retarget(addr string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.target = addr
}

func (p *TCPLink) Up() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = false
}

func (p *TCPLink) accept() {
	defer p.wg.Done()
	for {
		in, err := p.l.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		down, target := p.down, p.target
		p.mu.Unlock()
		if down {
			in.Close()
			continue
		}
		out, err := net.Dial("tcp", target)
		if err != nil {
			in.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, in, out)
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(in, out)
		go p.pipe(out, in)
	}
}

func (p *TCPLink) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	io.Copy(dst, src)
	dst.Close()
	src.Close()
}

// UDP relays UDP datagrams to target: each client address gets a socket
// of its own toward target. While it is down, datagrams are dropped both
// ways.
func UDP(t testing.TB, target string) Link {
	t.Helper()
	raddr, err := net.ResolveUDPAddr("udp", target)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	p := &udpLink{c: c, target: raddr, peers: map[string]*net.UDPConn{}}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(func() {
		c.Close()
		p.mu.Lock()
		p.closed = true
		for _, u := range p.peers {
			u.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

type udpLink struct {
	c      *net.UDPConn
	target *net.UDPAddr
	down   atomic.Bool
	wg     sync.WaitGroup

	mu     sync.Mutex
	peers  map[string]*net.UDPConn // by client address: the socket toward target
	closed bool
}

func (p *udpLink) Addr() string { return p.c.LocalAddr().String() }
func (p *udpLink) Down()        { p.down.Store(true) }
func (p *udpLink) Up()          { p.down.Store(false) }

// serve relays client datagrams toward target.
func (p *udpLink) serve() {
	defer p.wg.Done()
	buf := make([]byte, 64<<10)
	for {
		n, from, err := p.c.ReadFromUDP(buf)
		if err != nil {
			return
		}
		if p.down.Load() {
			continue
		}
		u := p.peer(from)
		if u == nil {
			return
		}
		u.Write(buf[:n])
	}
}

// peer returns the socket toward target for client from, starting its
// relay back on first use; nil once the link is closed.
func (p *udpLink) peer(from *net.UDPAddr) *net.UDPConn {
	p.mu.Lock()
	defer p.mu.Unlock()
	if u := p.peers[from.String()]; u != nil || p.closed {
		return u
	}
	u, err := net.DialUDP("udp", nil, p.target)
	if err != nil {
		return nil
	}
	p.peers[from.String()] = u
	p.wg.Add(1)
	go p.back(u, from)
	return u
}

// back relays target's datagrams on u to client from.
func (p *udpLink) back(u *net.UDPConn, from *net.UDPAddr) {
	defer p.wg.Done()
	buf := make([]byte, 64<<10)
	for {
		n, err := u.Read(buf)
		if err != nil {
			return
		}
		if !p.down.Load() {
			p.c.WriteToUDP(buf[:n], from)
		}
	}
}
