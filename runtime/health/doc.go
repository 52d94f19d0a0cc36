// Package health serves a node's serving state over HTTP, for the
// readiness and liveness probes of an orchestrator such as Kubernetes.
//
// [Handler] answers two paths, as the gateway does on its own port:
//
//   - /readyz: 200 while the node serves (runtime's Node.Health is
//     HealthServing), 503 otherwise: from the moment Node.Shutdown begins
//     (draining) and after it returns. A load balancer or a rolling
//     update that follows readiness stops sending work to the node while
//     the node still finishes the calls in flight.
//   - /healthz: 200 while the process answers at all, whatever the
//     node's state: a draining node is alive, and restarting it would cut
//     its drain short.
//
// Each answer is the JSON object {"status": "serving"} (or "draining",
// "not_serving"), as the node's health pattern answers peers.
//
// Serve it on a port of its own, beside the node's listener, and shut
// that server down after the node:
//
//	srv := &http.Server{Addr: ":8081", Handler: health.Handler(node), ReadHeaderTimeout: 5 * time.Second}
//	go srv.ListenAndServe()
//	// ... on SIGTERM:
//	err := node.Shutdown(ctx) // /readyz answers 503 from its start
//	srv.Shutdown(ctx)
package health
