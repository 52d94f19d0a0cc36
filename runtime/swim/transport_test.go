package swim

import (
	"errors"
	"io"
	"log"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/wizardmesh/wizard/runtime/internal/testkit/leak"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
)

// transportPair starts two transports on 127.0.0.1 that Cleanup shuts
// down, and returns the logger they log to.
func transportPair(t *testing.T) (a, b *transport, logger *log.Logger) {
	t.Helper()
	logger = log.New(io.Discard, "", 0)
	for _, tr := range []**transport{&a, &b} {
		var err error
		if *tr, err = newTransport(net.ParseIP("127.0.0.1"), 0, logger); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { (*tr).Shutdown() })
	}
	return a, b, logger
}

func TestTransport(t *testing.T) {
	leak.Check(t)
	a, b, logger := transportPair(t)
	if a.port == 0 || a.port == b.port {
		t.Fatalf("ports %d and %d", a.port, b.port)
	}
	if _, err := newTransport(net.ParseIP("127.0.0.1"), a.port, logger); err == nil {
		t.Error("a second transport on a taken port")
	}

	ip, port, err := a.FinalAdvertiseAddr("", 0)
	if err != nil || !ip.Equal(net.ParseIP("127.0.0.1")) || port != a.port {
		t.Errorf("FinalAdvertiseAddr = %v, %d, %v", ip, port, err)
	}
	ip, port, err = a.FinalAdvertiseAddr("10.1.2.3", 9000)
	if err != nil || !ip.Equal(net.ParseIP("10.1.2.3")) || len(ip) != net.IPv4len || port != 9000 {
		t.Errorf("FinalAdvertiseAddr(10.1.2.3, 9000) = %v, %d, %v", ip, port, err)
	}
	if _, _, err := a.FinalAdvertiseAddr("not-an-ip", 1); err == nil {
		t.Error("FinalAdvertiseAddr took a name")
	}

	// A packet: its bytes in a buffer of their own, not the 64 KiB one.
	bAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(b.port))
	for _, msg := range []string{"first packet", "2nd"} {
		if _, err := a.WriteToAddress([]byte(msg), memberlist.Address{Addr: bAddr}); err != nil {
			t.Fatal(err)
		}
		p := testwait.Recv(t, b.PacketCh())
		if string(p.Buf) != msg || cap(p.Buf) >= 1024 || p.From.String() != net.JoinHostPort("127.0.0.1", strconv.Itoa(a.port)) || time.Since(p.Timestamp) > testwait.Guard {
			t.Errorf("packet %q (cap %d) from %v", p.Buf, cap(p.Buf), p.From)
		}
	}

	// A stream.
	c, err := a.DialAddressTimeout(memberlist.Address{Addr: bAddr}, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s := testwait.Recv(t, b.StreamCh())
	defer s.Close()
	if _, err := c.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 1)
	if _, err := io.ReadFull(s, got); err != nil || got[0] != 'x' {
		t.Errorf("stream read %q, %v", got, err)
	}
	if err := a.Shutdown(); err != nil {
		t.Error(err)
	}
	if err := a.Shutdown(); err != nil {
		t.Errorf("second Shutdown: %v", err)
	}
}

// TestTransportBlock: a test's partition drops the packets sent to and
// received from the addresses it blocks, and refuses dials to them, until
// lifted.
func TestTransportBlock(t *testing.T) {
	leak.Check(t)
	a, b, logger := transportPair(t)
	aAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(a.port))
	bAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(b.port))
	only := func(addr string) func(string) bool { return func(a string) bool { return a == addr } }
	send := func(msg string) {
		t.Helper()
		if _, err := a.WriteToAddress([]byte(msg), memberlist.Address{Addr: bAddr}); err != nil {
			t.Fatal(err)
		}
	}

	a.block(only(bAddr))
	send("dropped on sending")
	if _, err := a.DialAddressTimeout(memberlist.Address{Addr: bAddr}, time.Second); !errors.Is(err, errBlocked) {
		t.Errorf("dial through the partition: %v, want errBlocked", err)
	}
	a.block(only("127.0.0.1:1")) // another address: b's get through
	send("sent")
	if p := testwait.Recv(t, b.PacketCh()); string(p.Buf) != "sent" {
		t.Errorf("received %q first", p.Buf)
	}
	a.block(nil)
	b.block(only(aAddr))
	send("dropped on receiving")
	// A packet from another address, read after a's: once it is in, a's
	// was dropped.
	c, err := newTransport(net.ParseIP("127.0.0.1"), 0, logger)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Shutdown()
	if _, err := c.WriteToAddress([]byte("marker"), memberlist.Address{Addr: bAddr}); err != nil {
		t.Fatal(err)
	}
	if p := testwait.Recv(t, b.PacketCh()); string(p.Buf) != "marker" {
		t.Fatalf("received %q first", p.Buf)
	}
	b.block(nil)
	send("healed")
	if p := testwait.Recv(t, b.PacketCh()); string(p.Buf) != "healed" {
		t.Errorf("received %q first", p.Buf)
	}
	conn, err := a.DialAddressTimeout(memberlist.Address{Addr: bAddr}, time.Second)
	if err != nil {
		t.Fatalf("dial after the partition: %v", err)
	}
	conn.Close()
	testwait.Recv(t, b.StreamCh()).Close()
}

func TestPrivateIP(t *testing.T) {
	ip, err := privateIP()
	if err != nil {
		t.Skipf("no private address here: %v", err)
	}
	if !ip.IsPrivate() || ip.IsLoopback() {
		t.Errorf("privateIP() = %v", ip)
	}
}

// BenchmarkTransportWrite is the send side of the packet path: one
// WriteToAddress to an "ip:port", as memberlist calls it for every probe
// and gossip message.
func BenchmarkTransportWrite(b *testing.B) {
	logger := log.New(io.Discard, "", 0)
	a, err := newTransport(net.ParseIP("127.0.0.1"), 0, logger)
	if err != nil {
		b.Fatal(err)
	}
	defer a.Shutdown()
	// A socket that is never read: the kernel drops what overflows it.
	sink, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.ParseIP("127.0.0.1")})
	if err != nil {
		b.Fatal(err)
	}
	defer sink.Close()
	to := memberlist.Address{Addr: sink.LocalAddr().String()}
	msg := make([]byte, 256)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := a.WriteToAddress(msg, to); err != nil {
			b.Fatal(err)
		}
	}
}
