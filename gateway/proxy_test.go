package gateway

import (
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/wizardmesh/wizard/gateway/config"
)

func TestClientIPTrustedProxies(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("10.0.0.0/8")}
	for _, c := range []struct {
		name    string
		trusted []netip.Prefix
		remote  string
		xff     []string
		want    string
	}{
		{"no proxies: the peer", nil, "127.0.0.1:5000", []string{"203.0.113.7"}, "127.0.0.1"},
		{"untrusted peer: the peer", trusted, "192.0.2.1:5000", []string{"203.0.113.7"}, "192.0.2.1"},
		{"trusted peer: the client it names", trusted, "127.0.0.1:5000", []string{"203.0.113.7"}, "203.0.113.7"},
		{"trusted peer, no header", trusted, "127.0.0.1:5000", nil, "127.0.0.1"},
		{"chain: the rightmost untrusted", trusted, "127.0.0.1:5000", []string{"198.51.100.9, 203.0.113.7, 10.1.2.3"}, "203.0.113.7"},
		{"several headers are one list", trusted, "127.0.0.1:5000", []string{"198.51.100.9", "203.0.113.7"}, "203.0.113.7"},
		{"a spoofed left part is ignored", trusted, "127.0.0.1:5000", []string{"1.1.1.1, 203.0.113.7"}, "203.0.113.7"},
		{"all trusted: the leftmost", trusted, "127.0.0.1:5000", []string{"10.0.0.1, 10.0.0.2"}, "10.0.0.1"},
		{"garbage: the last proxy", trusted, "127.0.0.1:5000", []string{"203.0.113.7, not-an-ip"}, "127.0.0.1"},
		{"IPv6 client", trusted, "127.0.0.1:5000", []string{"2001:db8::1"}, "2001:db8::1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := proxyGateway(c.trusted)
			r := &http.Request{RemoteAddr: c.remote, Header: http.Header{}}
			for _, v := range c.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			if got := g.now().clientIP(r); got != c.want {
				t.Errorf("clientIP = %q, want %q", got, c.want)
			}
		})
	}
}

// TestRateLimitPerIPBehindProxy: behind a listed proxy, the per-IP limit
// counts the clients X-Forwarded-For names; from an unlisted one, the
// header is ignored.
func TestRateLimitPerIPBehindProxy(t *testing.T) {
	get := func(tg *testGateway, xff string) int {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), "GET", tg.base+"/echo", nil)
		req.Header.Set("X-Forwarded-For", xff)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	t.Run("trusted", func(t *testing.T) {
		tg := newTestGateway(t, settings{perIP: rateSpec{rate: 0.001, burst: 1}, trustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
		for _, c := range []struct {
			xff  string
			want int
		}{{"203.0.113.1", 200}, {"203.0.113.2", 200}, {"203.0.113.1", 429}} {
			if got := get(tg, c.xff); got != c.want {
				t.Errorf("X-Forwarded-For %s: %d, want %d", c.xff, got, c.want)
			}
		}
	})
	t.Run("untrusted", func(t *testing.T) {
		tg := newTestGateway(t, settings{perIP: rateSpec{rate: 0.001, burst: 1}})
		if got := get(tg, "203.0.113.1"); got != 200 {
			t.Errorf("first: %d, want 200", got)
		}
		if got := get(tg, "203.0.113.2"); got != 429 {
			t.Errorf("another X-Forwarded-For from the same peer: %d, want 429", got)
		}
	})
}

func TestTrustedProxiesConfig(t *testing.T) {
	cfg, err := config.Parse("gw.yaml", []byte("server: {trusted_proxies: [127.0.0.1, \"10.0.0.0/8\", \"::1\"]}\n"+oneRoute))
	if err != nil {
		t.Fatal(err)
	}
	got := settingsOf(cfg).trustedProxies
	want := []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	if len(got) != len(want) {
		t.Fatalf("trustedProxies = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("trustedProxies[%d] = %v, want %v", i, got[i], want[i])
		}
	}
	_, err = config.Parse("gw.yaml", []byte("server: {trusted_proxies: [\"10.0.0.0/33\", proxy.local]}\n"+oneRoute))
	if err == nil {
		t.Fatal("bad trusted_proxies accepted")
	}
	for _, s := range []string{"server.trusted_proxies[0]", "server.trusted_proxies[1]", "proxy.local"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not name %s", err, s)
		}
	}
}

const oneRoute = "routes: [{method: GET, path: /x, pattern: \"role:x\", auth: none}]\n"

// FuzzClientIP: whatever X-Forwarded-For holds, the client IP is the
// peer's, or an address the header names, and never one the header names
// when the peer is not a trusted proxy.
func FuzzClientIP(f *testing.F) {
	f.Add("127.0.0.1:5000", "203.0.113.7")
	f.Add("127.0.0.1:5000", "198.51.100.9, 203.0.113.7, 10.1.2.3")
	f.Add("192.0.2.1:5000", "203.0.113.7")
	f.Add("127.0.0.1:5000", "10.0.0.1,10.0.0.2")
	f.Add("127.0.0.1:5000", "::ffff:10.0.0.1, 2001:db8::1, garbage")
	f.Add("[::1]:5000", " , ,")
	g := proxyGateway([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("::1/128")})
	f.Fuzz(func(t *testing.T, remote, xff string) {
		r := &http.Request{RemoteAddr: remote, Header: http.Header{"X-Forwarded-For": {xff}}}
		got := g.now().clientIP(r)
		peer := peerIP(r)
		if got == peer {
			return
		}
		if !trusted(g.now().set.trustedProxies, peer) {
			t.Fatalf("peer %q is not trusted, yet the client is %q", peer, got)
		}
		for e := range strings.SplitSeq(xff, ",") {
			if a, err := netip.ParseAddr(strings.TrimSpace(e)); err == nil && a.Unmap().String() == got {
				return
			}
		}
		t.Fatalf("client %q is neither the peer %q nor in X-Forwarded-For %q", got, peer, xff)
	})
}

// proxyGateway is a gateway that knows only its trusted proxies.
func proxyGateway(trusted []netip.Prefix) *Gateway {
	g := &Gateway{}
	g.cur.Store(&live{set: settings{trustedProxies: trusted}})
	return g
}
