// Package harness compares wizard's remote calls with gRPC-go, net/http
// and a raw multiplexed-TCP floor, each server in its own OS process.
//
// Every contender serves the same unary call, {a, b} -> {r} with r = a + b,
// and is driven by N concurrent callers over one connection from the
// client process. [Run] measures requests per second and latency
// percentiles per contender and concurrency, takes the median of several
// runs, and also runs two scenarios of the seed article: two hops (service
// B answers after a 10 ms sleep, service A calls B, 50 callers) and the
// cluster (the same, with three replicas of B and A's client balancing
// over them: wizard's ring over runtime.StaticPeers, gRPC-go's
// round_robin; [ClusterRow] reports how evenly the replicas shared the
// calls).
//
// # Contenders
//
// The table is [Contenders]; adding a transport is one entry there. A
// wizard transport is one call to wizardContender with the constructor of
// its runtime.Transport.
//
// # Processes
//
// Servers are the running binary re-executed with the environment variable
// WIZARD_BENCH_SERVER set to a JSON [ServerSpec]; the binary calls
// [ServeIfChild] first thing in main (or TestMain). The child listens on
// 127.0.0.1 only, prints its address on stdout, and serves until its stdin
// is closed, which also happens when the parent dies, so no server outlives
// a run. Until then it answers one line on stdout to each query line on
// stdin: "served" asks how many calls its handler has answered.
package harness
