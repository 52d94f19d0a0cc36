package gateway

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// clientIP is the address the per-IP limit and the access log know a
// request by: its peer's, or, when the peer is one of server.trusted_proxies,
// the client its X-Forwarded-For names. The header's list (every
// X-Forwarded-For header, in order) is read from the right, each proxy
// appending the address it was reached from: the first address that is not
// a trusted proxy is the client (what is left of it anyone could have
// written); if every address is trusted, the leftmost. A malformed entry
// ends the walk at the last address known good.
func (l *live) clientIP(r *http.Request) string {
	peer := peerIP(r)
	proxies := l.set.trustedProxies
	if len(proxies) == 0 || !trusted(proxies, peer) {
		return peer
	}
	hops := r.Header.Values("X-Forwarded-For")
	client := peer
	for i := len(hops) - 1; i >= 0; i-- {
		list := strings.Split(hops[i], ",")
		for j := len(list) - 1; j >= 0; j-- {
			a, err := netip.ParseAddr(strings.TrimSpace(list[j]))
			if err != nil {
				return client
			}
			client = a.Unmap().String()
			if !trustedAddr(proxies, a) {
				return client
			}
		}
	}
	return client
}

// peerIP is the request's peer address without its port.
func peerIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

func trusted(proxies []netip.Prefix, ip string) bool {
	a, err := netip.ParseAddr(ip)
	return err == nil && trustedAddr(proxies, a)
}

func trustedAddr(proxies []netip.Prefix, a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range proxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
