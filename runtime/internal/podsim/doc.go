// Package podsim simulates the Kubernetes shape of deploy/kubernetes on
// one machine: "pods" are processes in network namespaces with their own
// addresses (runtime/internal/testkit/faultnet), and a "cluster" process
// in a namespace of its own plays cluster DNS and the kubelet's
// readiness probes. Its tests run a Deployment's rolling update, a
// scale 3 → 10 → 3, two pods killed at once and a roll of the gateway
// under 200 WebSocket clients, each under a steady load, and count what
// the callers saw and what the servers ran.
//
// # Running
//
// It runs only when asked: WIZARD_PODSIM=1 for the short form (each
// scenario well under a minute), WIZARD_PODSIM=long for the manifests'
// timings; it needs root, /dev/net/tun and the ip command, and skips
// without them (a failure under WIZARD_REQUIRE=1). `make podsim-short`
// runs the short form (CI runs it), `make podsim` the long one.
//
// # Pods
//
// The test binary is re-executed in a host's namespace as each pod. A
// server pod runs examples/services/mesh.Serve, the main of the example
// services, with the flags of deploy/kubernetes/base/mathserver.yaml:
// -listen on the pod's address, -health-addr=:8081, -gossip=0.0.0.0:7946
// with -gossip-advertise the pod's address, -dns=wizard-gossip,
// -preset=lan, a gossip key file and mutual TLS with one certificate
// named wizard-mesh. It serves a non-idempotent pattern, whose
// executions it appends per key to a file as they run, and an idempotent
// one. The caller pod joins the same mesh through the SRV name
// _gossip._udp.wizard-gossip and runs 4 workers of each kind, each at
// most 100 calls/s: idempotent calls with runtime.Idempotent,
// non-idempotent calls with unique keys; it counts ok and failed calls by
// kind, errors by code, and the first and last ok call each pod served.
//
// # Cluster DNS and probes
//
// Each namespace's /etc/resolv.conf (through /etc/netns/NAME, which `ip
// netns exec` mounts) names the cluster process, at 10.77.0.1, with the
// search path of a pod in namespace default; the test removes those
// files when it ends, and the next run those a killed run left. It answers
// wizard-gossip.default.svc.cluster.local with an A record per pod and
// _gossip._udp.wizard-gossip… with an SRV record per pod, as cluster DNS
// does for the headless Service of deploy/kubernetes/base/gossip.yaml:
// since that sets publishNotReadyAddresses, a pod is listed from the
// moment it has its address until its process has exited, ready or not
// (and terminating pods stay listed, as the EndpointSlice controller
// keeps them for such a Service). It probes every pod's /readyz every 2
// s (the manifests' periodSeconds) and reports each change.
//
// It also stands for the Service wizard-gateway, a ClusterIP Service, as
// kube-proxy makes one: a TCP proxy on its own address, port 80, that
// sends each new connection to a gateway pod that is ready and not
// terminating, picked at random, and leaves established connections
// where they are. That is what the clients of a ClusterIP Service get,
// and what a roll of the gateway has to survive: the Service stops
// sending new connections to a pod as its deletion starts, while the
// WebSocket connections it holds stay until the pod closes them. (Clients
// that picked a gateway from DNS would stand for a headless Service,
// which deploy/kubernetes does not give the gateway.)
//
// # Rolling update
//
// Five server pods and the caller start; after a warm-up under load,
// each step does what a Deployment with maxSurge 1 and maxUnavailable 0
// does: a new pod at a new address starts, and once its readiness probe
// passes an old pod is deleted: its preStop sleep (1 s in the short
// form, the manifests' 5 s in the long one), SIGTERM, the graceful
// shutdown (leave, goaway, drain), exit; its grace period
// (terminationGracePeriodSeconds, 20 s) bounds the whole. The long form
// rolls the Deployment twice, then rolls a Deployment of one replica with
// no preStop sleep and a probe every 50 ms: an old pod gets SIGTERM as
// soon as its successor's /readyz answers 200, so a node that reported
// ready before the caller routes to it would fail calls.
//
// Targets: no failed idempotent call, no non-idempotent key run twice,
// no call failed with not_found, no ok call whose key no pod ran, every
// old pod exited within its grace period; failed non-idempotent calls
// are reported and must be 0 too. The figures (calls, failures by code,
// each step's times) are logged.
//
// # Scale
//
// Three server pods and the caller; 7 pods start at once and the test
// waits until each is ready and has answered a call of the caller's;
// then the 7 newest are deleted at once, as a ReplicaSet scaled down
// deletes the pods ready the shortest time, each with its preStop
// sleep, SIGTERM, drain and exit. The targets are the rolling update's.
//
// # Node lost
//
// Five server pods and the caller; two pods are killed at once with
// SIGKILL (no preStop, no drain), then replaced by two new pods. It runs
// twice: "killed", where the pods' hosts stay and their kernel resets
// their connections, and "unreachable", where their hosts are cut off
// the network before the kill, so that nothing of theirs answers, as
// with a node lost. Idempotent calls must not fail (the caller sends
// them again to another pod); non-idempotent calls in flight on the
// killed pods may fail and are counted by code, with how many of them a
// pod had run; no key may run twice, and no ok call may be one no pod
// ran.
//
// # Gateway roll
//
// Three server pods, and two gateway pods run from cmd/wizard-gateway,
// built by the test, as deploy/kubernetes/base/gateway.yaml runs it: -c
// and gateway-config.yaml's configuration (its Secrets' files where the
// test wrote them, one route, POST /api/podsim/once, to the server pods'
// non-idempotent pattern), WIZARD_GATEWAY_GOSSIP_ADVERTISE the pod's
// address, readiness on /readyz of its HTTP port; its log level is warn.
// 200 WebSocket clients (coder/websocket), in a process of their own,
// connect through the Service's proxy and each makes a call every 500
// ms, one at a time, with a key of its own. The Deployment is rolled
// (maxSurge 1, maxUnavailable 0; twice in the long form): a new gateway
// pod becomes ready, then an old one leaves the Service's endpoints, gets
// its preStop sleep and SIGTERM, answers its requests in flight,
// refuses new request frames (503 unavailable), closes each WebSocket
// with 1012 and exits, within its 25 s grace period. A client sends a
// request answered 503 again, and one left unanswered when its
// connection was closed with 1012 (a draining gateway answers every
// request it runs before its close frame; a frame that crossed it was
// not run), on its next connection, with the same key; it reconnects
// at once when its connection closes.
//
// Targets: every client connected; every call answered 200, or 503 or
// unanswered at a 1012 close and then answered 200 when sent again; no
// call lost (unanswered at any other end of its connection); every key
// answered 200 run once by a server pod, no key run twice; some clients
// reconnected; every old gateway exited within its grace period. The
// reconnects, the close codes and the longest time from a close to the
// next connection are logged.
//
// # Figures
//
// At 6257aff, on a 2-core machine shared with other work (load average
// 10 to 35), every target held; docs/kubernetes.md has the tables. The
// short form took 1 min 36 s in all (the gateway's build included), the
// long one 4 min 5 s. Calls ok, idempotent / not:
//
//	roll, 5 replicas, short / long          7,003 / 7,019    24,659 / 24,654
//	roll, 1 replica, no preStop, 50 ms      3,031 / 3,034 (long)
//	scale 3 → 10 → 3, short / long          2,131 / 2,162     6,065 / 6,046
//	2 pods killed, short / long             2,135 / 2,131     4,719 / 4,727
//	  failed: 4 / 2 non-idempotent, unavailable, none run by a pod
//	2 pods killed, hosts cut off            1,421 / 1,334     4,067 / 3,916
//	  failed: 4 / 4 non-idempotent, unavailable, none run by a pod
//	gateway roll, short / long: 4,222 / 15,387 answered 200; 23 / 137
//	  unanswered at a 1012 close and sent again, 0 answered 503, 0 lost;
//	  247 / 518 reconnects, the longest 0.10 / 0.29 s from close to
//	  connected
//
// No key ran twice in any run. With the hosts cut off, the failed calls
// ended 2.27–2.56 s after the kill (the connection's keep-alive). In a
// scale-up the last new pod answered a call 0.46–2.45 s after it in ten
// runs.
package podsim
