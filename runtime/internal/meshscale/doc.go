// Package meshscale measures how gossip and catalogs cost as a wizard
// mesh grows (make scale). It holds no code outside its tests.
//
// Each member is a real wizard node: runtime.New with runtime/swim's
// discovery (the LAN preset unless WIZARD_SCALE_PRESET=fast) and the TCP
// transport, gossip and transport on loopback sockets. The test binary is
// re-executed as a few host processes (WIZARD_SCALE_PROCS, default 4)
// that share the members of a mesh of N between them (N−1 members, each
// a memberlist instance of its own), and as one probe process per trial
// (the N-th member) that joins, serves its patterns, and is killed with
// SIGKILL: a crash, its sockets closed without leaving.
//
// For each N (WIZARD_SCALE_SIZES, default 50,100,200,500) it measures:
//
//   - the mesh formed: every host member routes every other's first
//     pattern, from the first host process's start;
//   - new patterns routed everywhere: every member adds its other 99
//     patterns at once (a new digest each), until every member routes
//     every other's last pattern;
//   - catalog heap per member per 100 remote patterns: the hosts' live
//     heap after a GC, before and after those 99 patterns, divided by the
//     members and by the remote patterns each member took in;
//   - at rest, over a window (WIZARD_SCALE_REST, default 30s): gossip
//     bytes sent per member and second, counted by memberlist's own
//     metrics memberlist.udp.sent and memberlist.tcp.sent (payload bytes,
//     without IP, UDP or TCP headers) through a go-metrics sink, and the
//     host processes' CPU time per member;
//   - per trial (WIZARD_SCALE_TRIALS, default 3): the probe's start
//     (just before runtime.New) until every host member routes its first
//     and last pattern to it; its crash until no member routes it (the
//     runtime drops a peer's catalog when its connection closes); its
//     crash until no member lists it (gossip declared it dead).
//
// A condition that does not hold on every member within a wait
// (WIZARD_SCALE_WAIT, default 3m) is reported with what is missing; a
// mesh that does not form ends the run (larger sizes would not either),
// and figures at rest and the heap count only for sizes whose new
// patterns settled.
//
// Times are each host's wall clock when the condition held on all its
// members (polled every 10 ms for joins and crashes, 50 ms otherwise),
// the latest of the hosts. WIZARD_SCALE_REPORT names a file for the
// Markdown table. WIZARD_SCALE_LOG=1 (or debug) sends the nodes' warnings
// (or everything) to stderr; WIZARD_SCALE_DEBUG=1 prints each pair of
// members as the condition waited on holds for it. WIZARD_SCALE_HEAPPROFILE
// names a directory where each host writes its heap profile at each heap
// count (heap-n<host members>-host<first member>-<0 before the new patterns, 1
// after>.pprof; compare them with go tool pprof -base), allocations
// sampled every 4 KiB. WIZARD_SCALE_CPUPROFILE names a directory for each
// host process's CPU profile over its first minute (the mesh forming),
// host-<first>.pprof. WIZARD_SCALE_COMPRESS=1 turns memberlist's
// compression of gossip on (swim's presets turn it off).
package meshscale
