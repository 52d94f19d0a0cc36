// Package transporttest is the conformance suite that every
// [runtime.Transport] passes: node-level scenarios (round trips, deadlines,
// no-reply calls, reconnects, graceful shutdown and its deadline, chained
// calls drained, restarted callers, overloaded and killed replicas, sticky
// routing, de-duplicated answers neither stolen nor planted by a spying
// peer, leaks, concurrent load, health through start, drain and
// shutdown) run by [Run] against a transport that the
// caller makes, [DedupBoundToIdentity] for transports with mutual TLS, and
// the benchmark [Benchmark]. It also holds the
// helpers those scenarios share with the transports' own tests: nodes
// closed at cleanup, waits for a routable pattern or a log line, a [Gate]
// for blocked handlers. It is for tests only; its entry points for a
// transport written outside this module are those of the public package
// runtime/transporttest, which calls them.
//
// The typed calls go through the stubs of the suite's own contract,
// wizard.testkit.v1.MathService (package testpb, generated from
// runtime/internal/testkit/proto), never through the examples': the
// runtime's tests do not depend on what the examples generate.
package transporttest
