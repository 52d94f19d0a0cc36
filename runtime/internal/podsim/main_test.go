//go:build linux

package podsim_test

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// simEnv gates the tests: "1" for the short form, "long" for the
// manifests' timings; unset, they skip.
const simEnv = "WIZARD_PODSIM"

// roleEnv holds a process's role when the test binary runs as a pod or
// as the cluster: "pod", or the JSON of a callerSpec, clusterSpec or
// wsSpec after "caller ", "cluster " or "wsclients ".
const roleEnv = "WIZARD_PODSIM_ROLE"

// TestMain makes the test binary a pod, the caller or the cluster when
// roleEnv says so; otherwise it runs the tests.
func TestMain(m *testing.M) {
	role := os.Getenv(roleEnv)
	if role == "" {
		os.Exit(m.Run())
	}
	var err error
	switch {
	case role == "pod":
		err = runPod()
	case len(role) > 7 && role[:7] == "caller ":
		var spec callerSpec
		if err = json.Unmarshal([]byte(role[7:]), &spec); err == nil {
			err = runCaller(spec)
		}
	case strings.HasPrefix(role, "wsclients "):
		var spec wsSpec
		if err = json.Unmarshal([]byte(role[10:]), &spec); err == nil {
			err = runWSClients(spec)
		}
	case len(role) > 8 && role[:8] == "cluster ":
		var spec clusterSpec
		if err = json.Unmarshal([]byte(role[8:]), &spec); err == nil {
			err = runCluster(spec)
		}
	default:
		err = fmt.Errorf("%s=%q", roleEnv, role)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "podsim:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// form holds the timings of one form of the tests.
type form struct {
	name    string
	warm    time.Duration // load before the first step and after the last
	preStop time.Duration // the preStop sleep of a deleted pod
	rolls   int           // rolling updates of the Deployment, one after the other
}

var (
	shortForm = form{name: "short", warm: 2 * time.Second, preStop: time.Second, rolls: 1}
	longForm  = form{name: "long", warm: 5 * time.Second, preStop: 5 * time.Second, rolls: 2}
)

// gate skips t unless simEnv asks for the tests, and returns the form.
func gate(t *testing.T) form {
	t.Helper()
	switch os.Getenv(simEnv) {
	case "1", "short":
		return shortForm
	case "long":
		return longForm
	case "":
		t.Skipf("the Kubernetes simulation runs with %s=1 (short form) or %s=long (the manifests' timings); it needs root, /dev/net/tun and ip", simEnv, simEnv)
	default:
		t.Fatalf("%s=%q: want 1 or long", simEnv, os.Getenv(simEnv))
	}
	panic("unreachable")
}

// phase lets the scenario's timeline run for d: the length of a phase
// under test (a warm-up, a preStop sleep), not a wait for an event.
func phase(d time.Duration) { time.Sleep(d) }
