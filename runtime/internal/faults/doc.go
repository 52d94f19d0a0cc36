// Package faults is the fault suite: tests that run real wizard nodes as
// separate processes in network namespaces and inject faults between
// them in userspace (runtime/internal/testkit/faultnet), under a steady
// load, and report each figure against the targets of issue 12.
//
// # Running
//
// It runs only when asked: WIZARD_FAULT=1 for the short form (about 3
// minutes), WIZARD_FAULT=long for the durations (about 7
// minutes); it needs root, /dev/net/tun and the ip command, and skips
// without them (a failure under WIZARD_REQUIRE=1). The results table
// (markdown: scenario, figure, value, target, met or missed) is printed
// at the end of the run and, with WIZARD_FAULT_REPORT=path, written to
// path. `make faults` (long) and `make faults-short` run it.
//
// A call run twice fails the suite; so does a missed target, but only
// after every scenario has run, so that the table is complete. A missed
// target on calls logs what it needs to be understood: the first failed
// calls (when each began, how long it took, its error) and the caller
// node's own log.
//
// # Nodes
//
// The test binary is re-executed in the hosts' namespaces as the nodes
// (TestMain): servers s1…sN and a caller on host 0, with default options
// except plain TCP (tcp.WithInsecure) and keyless gossip
// (swim.WithInsecure), which a non-loopback address needs. Servers serve
// a non-idempotent pattern, whose executions they append per key to a
// file as they run (a kill -9 loses none), and an idempotent one. The
// caller runs 4 workers of each kind, each at most 100 calls/s (800/s in
// all): idempotent calls with runtime.Idempotent, non-idempotent calls
// with unique keys; it counts per 100 ms ok calls by kind and by the
// server that answered, failed calls by when they ended and began, and
// errors by code. Discovery is runtime.StaticPeers or runtime/swim.
//
// # Scenarios and durations
//
// Short form / long form:
//   - load before each fault: 3 s / 5 s;
//   - 5% and 20% loss on every link of one of two servers: 8 s / 20 s;
//   - 50 ms ± 20 ms delay on what one of two servers sends (as netem on
//     its interface): 6 s healthy then 6 s delayed / 20 s and 20 s;
//   - a full partition of one of two servers, then heal: 5 s / 10 s;
//   - a one-way partition (what the server sends is dropped): 5 s / 10 s;
//   - kill -9 of one of two servers, restarted on its address after
//     5 s / 10 s;
//   - a caller and four servers gossiping, split 3/2, then healed, with
//     swim.Fast and swim.LAN: 10 s / 15 s;
//   - the same five under 10% loss on every link, swim.LAN: 20 s / 60 s.
//
// The one-server scenarios run with StaticPeers; the long form runs them
// with gossip (LAN) too, the short form its partition and kill -9.
//
// # Figures
//
//   - Calls run twice: non-idempotent keys executed more than once, over
//     every server (target 0, always); and ok calls whose key no server
//     ran (0).
//   - Failed idempotent calls, over the whole run: target 0, since another
//     server could always answer.
//   - Time to route around a partition or crash: from its start until no
//     call started later fails and the ok rate is back at half the rate
//     before the fault or more, in that 100 ms and over every 1 s window
//     to the fault's end (target 2 s; missed if not 1 s before the end).
//   - Throughput with the delay: ok calls/s delayed over healthy, each
//     phase without its first second (target 0.8x).
//   - After a heal (or restart): how soon every node's member list holds
//     every node, and the healed server answers calls again (target 10 s
//     with swim.Fast, 60 s with swim.LAN, 10 s with StaticPeers).
//   - False deaths under loss: members gone from a node's member list
//     while healthy (target 0, held by the long form's 60 s: in the short
//     form's 20 s the count is reported only, since a false death is rare
//     enough that a short run would fail at random rather than tell a
//     regression); suspicions are counted too.
package faults
