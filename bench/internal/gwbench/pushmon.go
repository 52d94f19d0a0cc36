package gwbench

import (
	"errors"
	"os"
	"time"

	"github.com/wizardmesh/wizard/bench/internal/benchkit"
)

// pushMonitors watch a push run (events or streams): the gateway's CPU
// time and resources, this process's (the load generator's) CPU and the
// pushing process's (the emitter or streamer).
type pushMonitors struct {
	gateway      int // pid
	cpu0         time.Duration
	gw           *monitor
	self, pusher *monitor
}

// pushFigures are what pushMonitors measured over a run.
type pushFigures struct {
	GatewayCPU       time.Duration
	Res              Resources
	LoadCPU, PushCPU float64
}

// startPushMonitors starts watching the gateway (pid gateway) and the
// pushing process (pid pusher).
func startPushMonitors(gateway, pusher int) (*pushMonitors, error) {
	cpu0, err := benchkit.CPU(gateway)
	if err != nil {
		return nil, err
	}
	gw, err := startMonitor([]int{gateway}, 250*time.Millisecond)
	if err != nil {
		return nil, err
	}
	self, err1 := startMonitor([]int{os.Getpid()}, time.Second)
	pusher2, err2 := startMonitor([]int{pusher}, time.Second)
	if err := errors.Join(err1, err2); err != nil {
		gw.finish()
		return nil, err
	}
	return &pushMonitors{gateway: gateway, cpu0: cpu0, gw: gw, self: self, pusher: pusher2}, nil
}

// stop ends the monitors of a run that failed.
func (m *pushMonitors) stop() {
	m.gw.finish()
	m.self.finish()
	m.pusher.finish()
}

// finish ends the monitors and returns what they measured.
func (m *pushMonitors) finish() (pushFigures, error) {
	var f pushFigures
	cpu1, err := benchkit.CPU(m.gateway)
	if err != nil {
		m.stop()
		return f, err
	}
	f.GatewayCPU = cpu1 - m.cpu0
	f.Res, err = m.gw.finish()
	sr, _ := m.self.finish()
	pr, _ := m.pusher.finish()
	f.LoadCPU, f.PushCPU = sr.AvgCPU, pr.AvgCPU
	return f, err
}
