// Package transporttest is the conformance suite of a [runtime.Transport],
// as golang.org/x/net/nettest is for a net.Conn: a transport written in
// any module passes [Run] to show that nodes built on it behave as they
// do on runtime/tcp, runtime/quic and runtime/nats.
//
// A transport's test gives Run a [NewTransport] that makes a fresh
// transport, listener and dialer in one, for each node of a scenario:
//
//	func TestConformance(t *testing.T) {
//		transporttest.Run(t, func(t testing.TB, log *slog.Logger) runtime.Transport {
//			tr, err := mytransport.New(mytransport.WithLogger(log))
//			if err != nil {
//				t.Fatal(err)
//			}
//			return tr
//		})
//	}
//
// The scenarios start nodes that listen on 127.0.0.1 with port 0 and call
// one another: round trips (JSON, protobuf, errors), deadlines and
// cancellation reaching the remote handler, no-reply calls, reconnects,
// graceful shutdown and its deadline, restarted callers, overloaded and
// killed replicas, sticky routing, de-duplicated answers neither stolen
// nor planted by a spying peer, goroutine leaks, concurrent load, and
// health through start, drain and shutdown. What a transport must do to
// pass is what [runtime.Transport], [runtime.Conn], [runtime.Listener]
// and [runtime.Server] document, and two things more:
//
//   - When a connection learns that its peer is shutting down (the
//     goaway that [runtime.GoAwayConn] reports), the transport logs a
//     record, at any level, whose message contains "going away": the
//     scenarios of a shutdown wait for it.
//   - A listener shares a node's in-flight limit (the Server is a
//     [runtime.InFlightLimiter]; see [runtime.WithMaxInFlight]) among its busy
//     connections, and once the node is full refuses a call beyond its
//     connection's part at once, with a reply of [runtime.CodeResourceExhausted] and
//     [runtime.FlagRefused], so that one flooding caller does not starve
//     the others (scenario FairShedding).
//
// The other optional interfaces beside [runtime.Transport]
// ([runtime.PeerCertificateConn], ...) make a transport faster or safer
// but no scenario requires them. The package's tests hold a transport
// written with the public API alone, calls through memory between nodes
// of one process, that passes the suite, also built in a module of its
// own.
package transporttest

import (
	"log/slog"
	"testing"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/transporttest"
)

// NewTransport makes a new transport for one node of a scenario, with its
// records going to log (never nil; the suite waits on it for a goaway,
// see the package documentation). The transports one test makes must
// reach one another: with TLS, they trust the same CA. A listener binds
// 127.0.0.1 with port 0, or with a port that was free a moment before
// (a node restarted at the same address).
type NewTransport func(t testing.TB, log *slog.Logger) runtime.Transport

// Run runs the conformance suite against the transports newTransport
// makes, one subtest per scenario. The scenarios run one after another
// and take some seconds each.
func Run(t *testing.T, newTransport NewTransport) {
	transporttest.Run(t, transporttest.NewTransport(newTransport))
}

// Benchmark measures a typed call between two nodes of newTransport's
// transports in this process, one connection between them: serially
// (with and without a deadline), with breakers, through ActE in
// parallel, and through Act with a map, each with b.ReportAllocs.
func Benchmark(b *testing.B, newTransport NewTransport) {
	transporttest.Benchmark(b, transporttest.NewTransport(newTransport))
}

// DedupBoundToIdentity checks, for a transport that authenticates its
// callers (mutual TLS), that an answer a node stored to de-duplicate a
// call is given again only to a caller with the same identity: srv serves
// with client certificates required, a and b dial with two different
// ones.
func DedupBoundToIdentity(t *testing.T, srv, a, b runtime.Transport) {
	transporttest.DedupBoundToIdentity(t, srv, a, b)
}
