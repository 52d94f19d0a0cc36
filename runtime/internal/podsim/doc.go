// Package podsim simulates the Kubernetes shape of deploy/kubernetes on
// one machine: "pods" are processes in network namespaces with their own
// addresses (runtime/internal/testkit/faultnet), and a "cluster" process
// in a namespace of its own plays cluster DNS and the kubelet's
// readiness probes. Its tests run a Deployment's rolling update under a
// steady load and count what the callers saw and what the servers ran.
//
// # Running
//
// It runs only when asked: WIZARD_PODSIM=1 for the short form (well
// under a minute of rolling), WIZARD_PODSIM=long for the manifests'
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
package podsim
