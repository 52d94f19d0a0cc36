// Package gwbench measures wizard-gateway, the HTTP and WebSocket edge of
// a wizard mesh, against moleculer-web and grpc-gateway.
//
// Every contender is its own set of OS processes on 127.0.0.1, and the
// load comes from the process that runs [Run]:
//
//   - wizard-gateway: the real binary (cmd/wizard-gateway, built by [Run]
//     from the main module) with a YAML route POST /echo ->
//     role:bench,cmd:echo, in front of an echo service on a second wizard
//     node over TCP (this binary re-executed, see [ServeIfChild]);
//   - moleculer-web: Node.js, moleculer-web in one broker and the echo
//     service in another, joined by Moleculer's TCP transporter on
//     127.0.0.1 (moleculer/server.js; its packages installed with npm ci
//     from the committed package-lock.json);
//   - grpc-gateway: an HTTP->gRPC gateway process (grpc-gateway/v2's
//     runtime.ServeMux) in front of a gRPC echo server process.
//
// Two measurements: pathfinder's scenario ([Ramp]: WebSocket or HTTP
// keep-alive clients added in stages, each in a closed loop, with and
// without a JWT, the gateway's memory and CPU read from /proc) and the
// side by side comparison ([Compare]: HTTP at a few numbers of
// connections, one request in flight per connection, plus a direct
// wizard TCP call as the baseline of the gateway's overhead).
//
// A third, event push ([EventsConfig]): WebSocket clients of
// wizard-gateway each hold one subscription (a pattern all share, or
// their own user's, filled from their JWT), and an emitter node in the
// mesh (this binary re-executed) emits acknowledged events at an offered
// rate, each carrying its wall-clock emit time and a sequence number;
// the clients' receipts give emit-to-receipt latency, frames delivered
// per second and frames lost (sequence gaps).
//
// Every echo carries the JSON {"name":"ada","n":N} and answers it back;
// every answer is checked.
package gwbench
