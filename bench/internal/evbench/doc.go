// Package evbench is compare's events mode (issue 31's benchmark): events
// per second and delivery latency, an emitter process handing events to
// 1 or 10 groups of subscriber processes, for wizard over the mesh,
// Moleculer's emit (Node.js), NATS core queue groups, nats.go's JetStream
// and wizard's durable events.
//
// Every process is a child of the parent that measures: Go contenders are
// the running binary re-executed (environment variable
// WIZARD_BENCH_EVENTS holds what it plays), Moleculer's are Node.js
// processes of bench/moleculer/events.mjs. They all speak the same line
// protocol on stdin and stdout: a first line (an address, or "ready"),
// then one answer line per query line; EOF on stdin stops them.
//
// The emitter stamps each event with the wall clock's time when it is
// emitted; the subscriber's handler subtracts it from the clock when it
// starts, on the same machine, and files the difference in a histogram
// (buckets 5% wide) that the parent reads and merges.
package evbench
