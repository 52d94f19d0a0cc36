//go:build linux

package podsim_test

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// The cluster's names, as a pod in namespace default sees them.
const (
	zone        = "default.svc.cluster.local."
	serviceName = "wizard-gossip." + zone
	srvName     = "_gossip._udp." + serviceName
	gossipPort  = 7946
	healthPort  = 8081
	// ttl is the records' TTL, CoreDNS's default for a cluster.
	ttl = 5
	// gatewayPort is the gateway pods' HTTP port (gateway-config.yaml's
	// server.listen), servicePort the Service wizard-gateway's port,
	// which the cluster process serves on its own address.
	gatewayPort = 8080
	servicePort = 80
)

// publishNotReadyAddresses is the headless Service's setting in
// deploy/kubernetes/base/gossip.yaml (TestManifestMatches holds them
// equal): with it a pod is listed from when it has its address until it
// is gone, ready or not, terminating or not; without it, only while its
// readiness probe passes.
const publishNotReadyAddresses = true

// probePeriod and probeTimeout are the readiness probe's periodSeconds
// (deploy/kubernetes/base/*.yaml) and the default timeoutSeconds.
const (
	probePeriod  = 2 * time.Second
	probeTimeout = time.Second
)

// clusterSpec is what the cluster process is to be.
type clusterSpec struct {
	IP string // its address: port 53 serves DNS
}

// clusterOp is a line the test writes to the cluster's standard input:
// "add" a pod (it has its address: listed, probed), "term" a pod (it is
// being deleted: the gateway Service's proxy sends it no new
// connection), "del" a pod (gone).
type clusterOp struct {
	Op, Name, IP string
	// Period: the pod's readiness probe period, probePeriod when 0.
	Period time.Duration
	// Gateway: a gateway pod, an endpoint of the Service wizard-gateway
	// (the proxy), probed on its HTTP port instead of healthPort.
	Gateway bool
}

// probeEvent is a line the cluster prints: a pod's readiness changed, or
// (Name "") the cluster is up.
type probeEvent struct {
	Name  string
	Ready bool
	At    int64 // unix nanoseconds
}

// cluster is the cluster process's state.
type cluster struct {
	mu   sync.Mutex
	pods map[string]*simPod // by name
	out  *json.Encoder
	omu  sync.Mutex
}

type simPod struct {
	ip          string
	ready       bool
	gateway     bool
	terminating bool
	stop        context.CancelFunc
}

// runCluster serves DNS on spec.IP:53 (UDP and TCP) and probes the pods
// it is told of until its standard input ends.
func runCluster(spec clusterSpec) error {
	c := &cluster{pods: map[string]*simPod{}, out: json.NewEncoder(os.Stdout)}
	addr := net.JoinHostPort(spec.IP, "53")
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	h := dns.HandlerFunc(c.serveDNS)
	go (&dns.Server{PacketConn: pc, Handler: h}).ActivateAndServe()
	go (&dns.Server{Listener: ln, Handler: h}).ActivateAndServe()
	svc, err := net.Listen("tcp", net.JoinHostPort(spec.IP, fmt.Sprint(servicePort)))
	if err != nil {
		return err
	}
	go c.proxy(svc)
	c.print(probeEvent{At: time.Now().UnixNano()})
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		var op clusterOp
		if err := json.Unmarshal(sc.Bytes(), &op); err != nil {
			return err
		}
		c.apply(op)
	}
	return sc.Err()
}

func (c *cluster) print(e probeEvent) {
	c.omu.Lock()
	defer c.omu.Unlock()
	c.out.Encode(e)
}

// apply adds or removes a pod.
func (c *cluster) apply(op clusterOp) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch op.Op {
	case "add":
		ctx, stop := context.WithCancel(context.Background())
		c.pods[op.Name] = &simPod{ip: op.IP, gateway: op.Gateway, stop: stop}
		port := healthPort
		if op.Gateway {
			port = gatewayPort
		}
		go c.probe(ctx, op.Name, op.IP, port, cmp.Or(op.Period, probePeriod))
	case "term":
		if p := c.pods[op.Name]; p != nil {
			p.terminating = true
		}
	case "del":
		if p := c.pods[op.Name]; p != nil {
			p.stop()
			delete(c.pods, op.Name)
		}
	}
}

// probe probes a pod's /readyz every period, from when it is added, as
// a kubelet does, and prints each change of its readiness.
func (c *cluster) probe(ctx context.Context, name, ip string, port int, period time.Duration) {
	client := &http.Client{Timeout: probeTimeout}
	url := fmt.Sprintf("http://%s/readyz", net.JoinHostPort(ip, fmt.Sprint(port)))
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		ready := false
		if resp, err := client.Get(url); err == nil {
			ready = resp.StatusCode == http.StatusOK
			resp.Body.Close()
		}
		c.mu.Lock()
		p := c.pods[name]
		changed := p != nil && p.ready != ready && ctx.Err() == nil
		if changed {
			p.ready = ready
		}
		c.mu.Unlock()
		if changed {
			c.print(probeEvent{Name: name, Ready: ready, At: time.Now().UnixNano()})
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// listed returns the addresses of the pods the Service lists, sorted.
func (c *cluster) listed() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ips []string
	for _, p := range c.pods {
		if publishNotReadyAddresses || p.ready {
			ips = append(ips, p.ip)
		}
	}
	slices.Sort(ips)
	return ips
}

// podHost is the name of a pod's address under the Service, as cluster
// DNS names SRV targets: 10-77-0-3.wizard-gossip.default.svc.cluster.local.
func podHost(ip string) string {
	return strings.ReplaceAll(ip, ".", "-") + "." + serviceName
}

// serveDNS answers the Service's A and SRV names and its pods' names;
// AAAA of them is empty, any other name does not exist.
func (c *cluster) serveDNS(w dns.ResponseWriter, req *dns.Msg) {
	m := new(dns.Msg)
	m.SetReply(req)
	m.Authoritative = true
	if len(req.Question) != 1 {
		m.Rcode = dns.RcodeFormatError
		w.WriteMsg(m)
		return
	}
	q := req.Question[0]
	name := strings.ToLower(q.Name)
	ips := c.listed()
	a := func(owner, ip string) dns.RR {
		return &dns.A{Hdr: dns.RR_Header{Name: owner, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: ttl}, A: net.ParseIP(ip).To4()}
	}
	switch {
	case name == serviceName:
		if q.Qtype == dns.TypeA {
			for _, ip := range ips {
				m.Answer = append(m.Answer, a(q.Name, ip))
			}
		}
	case name == srvName:
		if q.Qtype == dns.TypeSRV {
			for _, ip := range ips {
				m.Answer = append(m.Answer, &dns.SRV{
					Hdr:      dns.RR_Header{Name: q.Name, Rrtype: dns.TypeSRV, Class: dns.ClassINET, Ttl: ttl},
					Priority: 0, Weight: 100, Port: gossipPort, Target: podHost(ip),
				})
				m.Extra = append(m.Extra, a(podHost(ip), ip))
			}
		}
	case strings.HasSuffix(name, "."+serviceName):
		ip := strings.ReplaceAll(strings.TrimSuffix(name, "."+serviceName), "-", ".")
		if !slices.Contains(ips, ip) {
			m.Rcode = dns.RcodeNameError
		} else if q.Qtype == dns.TypeA {
			m.Answer = append(m.Answer, a(q.Name, ip))
		}
	default:
		m.Rcode = dns.RcodeNameError
	}
	w.WriteMsg(m)
}

// proxy is the Service wizard-gateway (a ClusterIP Service, as
// deploy/kubernetes/base/gateway.yaml has it), as kube-proxy makes it:
// each new connection goes to one of the gateway pods that are ready and
// not terminating, picked at random, and stays there until one side
// closes it; a connection made while no pod is ready is refused (closed
// at once). It runs until ln is closed.
func (c *cluster) proxy(ln net.Listener) {
	for {
		in, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer in.Close()
			ip := c.endpoint()
			if ip == "" {
				return
			}
			out, err := net.DialTimeout("tcp", net.JoinHostPort(ip, fmt.Sprint(gatewayPort)), 5*time.Second)
			if err != nil {
				return
			}
			defer out.Close()
			done := make(chan struct{}, 2)
			go func() { io.Copy(out, in); done <- struct{}{} }()
			go func() { io.Copy(in, out); done <- struct{}{} }()
			<-done // either side gone: close both
		}()
	}
}

// endpoint picks a ready gateway pod that is not terminating, or "".
func (c *cluster) endpoint() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ips []string
	for _, p := range c.pods {
		if p.gateway && p.ready && !p.terminating {
			ips = append(ips, p.ip)
		}
	}
	if len(ips) == 0 {
		return ""
	}
	return ips[rand.IntN(len(ips))]
}
