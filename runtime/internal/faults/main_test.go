//go:build linux

package faults_test

import (
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"
)

// faultEnv gates the suite: "1" for the short form, "long" for the
// issue's durations; unset, the suite skips.
const faultEnv = "WIZARD_FAULT"

// TestMain makes the test binary a node process when roleEnv is set;
// otherwise it runs the tests and then prints (and writes) the results
// table.
func TestMain(m *testing.M) {
	if raw := os.Getenv(roleEnv); raw != "" {
		var spec nodeSpec
		err := json.Unmarshal([]byte(raw), &spec)
		if err == nil {
			err = runNode(spec)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "node:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	code := m.Run()
	if err := writeTable(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	os.Exit(code)
}

// form holds the durations of one form of the suite.
type form struct {
	name      string
	warm      time.Duration // load before the fault
	loss      time.Duration // 5% and 20% loss
	delay     time.Duration // each phase: healthy, then delayed
	partition time.Duration // full and one-way partitions
	down      time.Duration // kill -9 until the restart
	split     time.Duration // the 3/2 gossip split
	lossy     time.Duration // gossip under 10% loss
	variants  []variant     // discovery variants of the one-server scenarios
	// healVariants: further variants of the partition and kill -9
	// scenarios alone.
	healVariants []variant
}

// String lists the durations.
func (f form) String() string {
	return fmt.Sprintf("load %s before each fault; loss %s; delay: %s healthy, then %s delayed; partitions %s; kill -9 down %s; 3/2 split %s; gossip under loss %s",
		seconds(f.warm), seconds(f.loss), seconds(f.delay), seconds(f.delay), seconds(f.partition), seconds(f.down), seconds(f.split), seconds(f.lossy))
}

var (
	shortForm = form{name: "short", warm: 3 * time.Second, loss: 8 * time.Second, delay: 6 * time.Second,
		partition: 5 * time.Second, down: 5 * time.Second, split: 10 * time.Second, lossy: 20 * time.Second,
		variants: []variant{static}, healVariants: []variant{gossipLAN}}
	longForm = form{name: "long", warm: 5 * time.Second, loss: 20 * time.Second, delay: 20 * time.Second,
		partition: 10 * time.Second, down: 10 * time.Second, split: 15 * time.Second, lossy: 60 * time.Second,
		variants: []variant{static, gossipLAN}}
)

// durations is the form faultEnv selects (short when unset).
func durations() form {
	if os.Getenv(faultEnv) == "long" {
		return longForm
	}
	return shortForm
}

// gate skips t unless faultEnv asks for the suite.
func gate(t *testing.T) form {
	t.Helper()
	switch os.Getenv(faultEnv) {
	case "1", "short":
		return shortForm
	case "long":
		return longForm
	case "":
		t.Skipf("the fault suite runs with %s=1 (short form, ~3 min) or %s=long (the issue's durations, ~7 min); it needs root, /dev/net/tun and ip", faultEnv, faultEnv)
	default:
		t.Fatalf("%s=%q: want 1 or long", faultEnv, os.Getenv(faultEnv))
	}
	panic("unreachable")
}
