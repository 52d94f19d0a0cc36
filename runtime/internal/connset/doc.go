// Package connset keeps the connections of a stream transport's listener
// (tcp, quic) within its limits: at most a maximum at once, at most a
// maximum from one remote IP (an IPv4 address or an IPv6 /64), and none
// left without a request in flight for longer than the idle timeout.
//
// Room is shared fairly among IPs, whether their connections are idle or
// busy. A connection that would go over the maximum is taken from the IP
// with the most connections when it has at least two more than the
// newcomer's IP: its connection idle longest goes, else one without a
// request in flight, else the one looked at earliest; the caller of a
// request cut off that way sends it again elsewhere or over a new
// connection, and the node's de-duplication keeps a call that must run
// once from running twice. From an IP with just one more, only an idle
// connection goes, so that two IPs do not take turns closing each other's.
// Otherwise the newcomer's IP makes room among its own connections: the
// idlest, else one without a request in flight. A reserve (an eighth of
// the maximum by default) is kept for IPs with fewer than [FewConns]
// connections, so a new caller usually finds room without anyone being
// closed. An IP at the per-IP limit makes room among its own connections
// the same way. A connection still in its handshake counts as idle since
// it was accepted. When nothing may be closed, the newcomer is refused.
// So neither an attacker holding idle connections nor a few IPs keeping
// many busy can lock new callers out, and a caller never loses its
// connection to an IP with more.
//
// Activity is tracked with one atomic add when a request starts and one
// when it ends; the order of idleness is kept lazily: a connection is
// moved behind the others when the set finds it active since it last
// looked, while searching for one to close or sweeping for idle ones. The
// IP with the most connections is found in constant time, and at most a
// fixed number of connections is looked at per admission.
package connset
