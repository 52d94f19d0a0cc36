package runtime

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/url"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wizardmesh/wizard/runtime/discovery"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testlog"
)

func TestCertificateNodeID(t *testing.T) {
	uri := func(s string) *url.URL {
		u, err := url.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	for _, tc := range []struct {
		name string
		uris []*url.URL
		want string
	}{
		{"none", nil, ""},
		{"NodeURI", []*url.URL{NodeURI("orders-1")}, "orders-1"},
		{"NodeURI with a slash and a space", []*url.URL{NodeURI("eu/orders 1")}, "eu/orders 1"},
		{"parsed", []*url.URL{uri("wizard://node/orders-1")}, "orders-1"},
		{"escaped", []*url.URL{uri("wizard://node/a%20b")}, "a b"},
		{"after a SPIFFE id", []*url.URL{uri("spiffe://shop/orders"), NodeURI("orders-1")}, "orders-1"},
		{"the first of two", []*url.URL{NodeURI("a"), NodeURI("b")}, "a"},
		{"another scheme", []*url.URL{uri("spiffe://node/orders-1")}, ""},
		{"another host", []*url.URL{uri("wizard://nodes/orders-1")}, ""},
		{"no id", []*url.URL{uri("wizard://node/")}, ""},
		{"a user", []*url.URL{uri("wizard://x@node/orders-1")}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := certificateNodeID(&x509.Certificate{URIs: tc.uris}); got != tc.want {
				t.Errorf("certificateNodeID = %q, want %q", got, tc.want)
			}
		})
	}
	if got := certificateNodeID(nil); got != "" {
		t.Errorf("certificateNodeID(nil) = %q", got)
	}
	if got := NodeURI("orders-1").String(); got != "wizard://node/orders-1" {
		t.Errorf("NodeURI = %s", got)
	}
}

// certNet is a memNet whose connections prove the certificates certs
// holds for the addresses dialled (none for an address without one).
type certNet struct {
	*memNet
	mu    sync.Mutex
	certs map[string]*x509.Certificate
}

type certConn struct {
	Conn
	cert *x509.Certificate
}

func (c certConn) PeerCertificate() *x509.Certificate { return c.cert }

func (t *certNet) Dial(ctx context.Context, addr string) (Conn, error) {
	c, err := t.memNet.Dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return certConn{c, t.certs[addr]}, nil
}

func (t *certNet) name(addr, id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.certs[addr] = &x509.Certificate{URIs: []*url.URL{NodeURI(id)}}
}

// TestCertifiedPeerDialledAgain: a static peer whose certificate names
// another id than its catalog answers as is not routed, and warned of
// once; once it presents a certificate that names its id, it is routed
// within certifiedRetry, without discovery saying anything new, and stays
// routed as its catalog refreshes.
func TestCertifiedPeerDialledAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs testlog.Buffer
		net := newMemNet()
		memNode(t, net, "s", "role:r")
		cn := &certNet{memNet: net, certs: map[string]*x509.Certificate{}}
		cn.name("s", "x")
		d := &hostDiscovery{}
		c, err := New(WithID("c"), WithTransport(cn), WithDiscovery(d), WithLogger(logs.Logger()))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		d.host.PeerUp(discovery.Peer{Addr: "s"})
		time.Sleep(certifiedRetry / 2)
		synctest.Wait()
		if ms := c.Members(); len(ms) != 2 || ms[1].Patterns != 0 || !strings.Contains(ms[1].LastError, `certificate names node "x"`) {
			t.Errorf("Members() = %+v, want s unrouted, saying why", ms)
		}
		cn.name("s", "s")
		time.Sleep(certifiedRetry / 2)
		synctest.Wait()
		waitRoute(t, c, "role:r", "s")
		time.Sleep(10 * time.Second) // refreshes, confirmed by digest
		synctest.Wait()
		if net.count(net.confirms, "s") == 0 {
			t.Error("no refresh confirmed by digest")
		}
		waitRoute(t, c, "role:r", "s")
		if got := strings.Count(logs.String(), "level=WARN"); got != 1 || !strings.Contains(logs.String(), "certified=x id=s") {
			t.Errorf("%d warnings, want one naming both ids:\n%s", got, logs.String())
		}
	})
}

func TestForgedCaller(t *testing.T) {
	remote := func(id string) *Remote {
		cert := &x509.Certificate{Raw: []byte(id)}
		if id != "" {
			cert.URIs = []*url.URL{NodeURI(id)}
		}
		cs := tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert}, VerifiedChains: [][]*x509.Certificate{{cert}}}
		return NewRemote("tcp", "127.0.0.1:1", func() tls.ConnectionState { return cs })
	}
	for _, tc := range []struct {
		name   string
		remote *Remote
		stated string
		want   Code
	}{
		{"in-process", nil, "a", CodeOK},
		{"plain TCP", NewRemote("tcp", "127.0.0.1:1", nil), "a", CodeOK},
		{"a certificate that names no id", remote(""), "a", CodeOK},
		{"the id it names", remote("a"), "a", CodeOK},
		{"another id", remote("a"), "b", CodePermissionDenied},
		{"no id stated", remote("a"), "", CodePermissionDenied},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &Message{Remote: tc.remote}
			if tc.stated != "" {
				m.Meta = []MetaPair{{metaCaller, tc.stated}}
			}
			err := forgedCaller(m)
			if got := CodeOf(err); got != tc.want {
				t.Errorf("forgedCaller = %v, want %v", err, tc.want)
			}
		})
	}
}
