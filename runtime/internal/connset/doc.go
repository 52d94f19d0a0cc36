// Package connset keeps the connections of a stream transport's listener
// (tcp, quic) within its limits: at most a maximum at once, at most a
// maximum from one remote IP (an IPv4 address or an IPv6 /64), and none
// left without a request in flight for longer than the idle timeout.
//
// A connection that would go over a limit takes the place of the
// connection, of the same IP for the per-IP limit, that has been idle the
// longest, which is closed at once; a connection still in its handshake
// counts as idle since it was accepted. When every connection in the way
// has a request in flight, the new one is refused. So an attacker holding
// idle connections cannot lock callers out: each new connection pushes
// out the attacker's oldest.
//
// Activity is tracked with one atomic add when a request starts and one
// when it ends; the order of idleness is kept lazily: a connection is
// moved behind the others when the set finds it active since it last
// looked, while searching for one to close or sweeping for idle ones.
package connset
