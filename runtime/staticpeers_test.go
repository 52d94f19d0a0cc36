package runtime_test

import (
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/quic"
	"github.com/wizardmesh/wizard/runtime/tcp"
)

// TestStaticPeersBadAddress: New refuses a static peer its transport
// cannot dial, naming it, rather than dialling it in vain.
func TestStaticPeersBadAddress(t *testing.T) {
	tt, err := tcp.New()
	if err != nil {
		t.Fatal(err)
	}
	qt, err := quic.New(quic.WithInsecureSelfSigned())
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range []runtime.Transport{tt, qt} {
		for _, addr := range []string{"nohostport", "127.0.0.1:", ""} {
			n, err := runtime.New(runtime.WithTransport(tr), runtime.WithDiscovery(runtime.StaticPeers("127.0.0.1:7070", addr)))
			if err == nil {
				n.Close()
				t.Errorf("%s: StaticPeers(%q) accepted; want New to fail", tr.Name(), addr)
				continue
			}
			if want := "StaticPeers: \"" + addr + "\" is not a " + tr.Name() + " address"; !strings.Contains(err.Error(), want) {
				t.Errorf("%s: %v; want it to say %s", tr.Name(), err, want)
			}
		}
	}
}

// TestCatalogNotArrived: a call made before the catalog of a static peer
// arrived fails unavailable, saying to wait for it with WaitFor or
// WaitForReady.
func TestCatalogNotArrived(t *testing.T) {
	tr, err := tcp.New()
	if err != nil {
		t.Fatal(err)
	}
	// A peer that accepts and never answers: its catalog does not arrive
	// while the test runs.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		for _, c := range conns {
			c.Close()
		}
	})
	cl, err := runtime.New(runtime.WithTransport(tr), runtime.WithDiscovery(runtime.StaticPeers(ln.Addr().String())))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	_, err = cl.ActE(t.Context(), "role:x", nil)
	if runtime.CodeOf(err) != runtime.CodeUnavailable || !strings.Contains(err.Error(), "call Node.WaitFor(ctx, pattern) before the first call, or make the call with WaitForReady()") {
		t.Errorf("a call before the catalog: %v; want unavailable saying to use WaitFor or WaitForReady", err)
	}
}
