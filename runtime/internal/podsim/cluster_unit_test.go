//go:build linux

package podsim_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/miekg/dns"
)

// TestClusterDNS holds the cluster process's answers to what cluster DNS
// answers for the headless Service: A records of the pods, SRV records
// naming each pod with its A record, no such name otherwise. It runs the
// DNS server in the test process on loopback (no root needed).
func TestClusterDNS(t *testing.T) {
	c := &cluster{pods: map[string]*simPod{
		"a": {ip: "10.77.0.3", ready: true},
		"b": {ip: "10.77.0.4"}, // not ready: listed all the same (publishNotReadyAddresses)
	}}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(c.serveDNS)}
	go srv.ActivateAndServe()
	t.Cleanup(func() { srv.Shutdown() })
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "udp", pc.LocalAddr().String())
	}}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()

	addrs, err := r.LookupHost(ctx, serviceName)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(addrs)
	if want := []string{"10.77.0.3", "10.77.0.4"}; !slices.Equal(addrs, want) {
		t.Errorf("A %s = %v, want %v", serviceName, addrs, want)
	}
	_, srvs, err := r.LookupSRV(ctx, "", "", srvName)
	if err != nil {
		t.Fatal(err)
	}
	var targets []string
	for _, s := range srvs {
		if s.Port != gossipPort {
			t.Errorf("SRV %s: port %d, want %d", s.Target, s.Port, gossipPort)
		}
		ips, err := r.LookupHost(ctx, s.Target)
		if err != nil {
			t.Fatal(err)
		}
		targets = append(targets, strings.Join(ips, ","))
	}
	slices.Sort(targets)
	if want := []string{"10.77.0.3", "10.77.0.4"}; !slices.Equal(targets, want) {
		t.Errorf("SRV %s targets resolve to %v, want %v", srvName, targets, want)
	}
	for _, name := range []string{"other." + zone, podHost("10.77.0.9")} {
		_, err := r.LookupHost(ctx, name)
		var de *net.DNSError
		if !errors.As(err, &de) || !de.IsNotFound {
			t.Errorf("LookupHost(%s) = %v, want no such host", name, err)
		}
	}
}

// TestManifestMatches holds the simulation to the manifests it stands
// for: the headless Service's publishNotReadyAddresses, and the math
// service's strategy, flags, probe period, preStop sleep (the long
// form's) and grace period.
func TestManifestMatches(t *testing.T) {
	base := filepath.Join("..", "..", "..", "deploy", "kubernetes", "base")
	var svc struct {
		Spec struct {
			PublishNotReadyAddresses bool `yaml:"publishNotReadyAddresses"`
		}
	}
	read(t, filepath.Join(base, "gossip.yaml"), &svc)
	if svc.Spec.PublishNotReadyAddresses != publishNotReadyAddresses {
		t.Errorf("gossip.yaml: publishNotReadyAddresses %v; the simulation's DNS: %v", svc.Spec.PublishNotReadyAddresses, publishNotReadyAddresses)
	}
	var deploy struct {
		Spec struct {
			Strategy struct {
				RollingUpdate struct {
					MaxSurge       int `yaml:"maxSurge"`
					MaxUnavailable int `yaml:"maxUnavailable"`
				} `yaml:"rollingUpdate"`
			}
			Template struct {
				Spec struct {
					TerminationGracePeriodSeconds int `yaml:"terminationGracePeriodSeconds"`
					Containers                    []struct {
						Args           []string
						ReadinessProbe struct {
							PeriodSeconds int `yaml:"periodSeconds"`
						} `yaml:"readinessProbe"`
						Lifecycle struct {
							PreStop struct {
								Sleep struct{ Seconds int }
							} `yaml:"preStop"`
						}
					}
				}
			}
		}
	}
	read(t, filepath.Join(base, "mathserver.yaml"), &deploy)
	ru := deploy.Spec.Strategy.RollingUpdate
	if ru.MaxSurge != 1 || ru.MaxUnavailable != 0 {
		t.Errorf("mathserver.yaml: maxSurge %d, maxUnavailable %d; the simulation rolls with 1 and 0", ru.MaxSurge, ru.MaxUnavailable)
	}
	pod := deploy.Spec.Template.Spec
	if got := time.Duration(pod.TerminationGracePeriodSeconds) * time.Second; got != gracePeriod {
		t.Errorf("mathserver.yaml: terminationGracePeriodSeconds %s; the simulation's: %s", got, gracePeriod)
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("mathserver.yaml: %d containers, want 1", len(pod.Containers))
	}
	ctr := pod.Containers[0]
	if got := time.Duration(ctr.ReadinessProbe.PeriodSeconds) * time.Second; got != probePeriod {
		t.Errorf("mathserver.yaml: readiness periodSeconds %s; the simulation's: %s", got, probePeriod)
	}
	if got := time.Duration(ctr.Lifecycle.PreStop.Sleep.Seconds) * time.Second; got != longForm.preStop {
		t.Errorf("mathserver.yaml: preStop sleep %s; the long form's: %s", got, longForm.preStop)
	}
	// The arguments but for the Secrets' files, whose paths differ.
	var args []string
	for _, arg := range ctr.Args {
		if !strings.HasPrefix(arg, "-tls-") && !strings.HasPrefix(arg, "-gossip-key-file=") {
			args = append(args, arg)
		}
	}
	if want := podArgs("$(POD_IP)"); !slices.Equal(args, want) {
		t.Errorf("mathserver.yaml: arguments %q but for TLS and the gossip key; the simulation's pods: %q", args, want)
	}
	if !slices.Contains(ctr.Args, "-tls-server-name=wizard-mesh") {
		t.Errorf("mathserver.yaml: no -tls-server-name=wizard-mesh, which the simulation's pods are given")
	}
}

func read(t *testing.T, file string, v any) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}
