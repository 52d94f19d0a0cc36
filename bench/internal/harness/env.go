package harness

import (
	"bufio"
	"os"
	"os/exec"
	"runtime"
	"strings"
)

// Env describes the machine and the code measured.
type Env struct {
	GoVersion  string
	OS, Arch   string
	CPU        string
	NumCPU     int
	GOMAXPROCS int
	Commit     string // of the repository, "+dirty" when its tree has changes
	// LoadStart is the 1, 5 and 15 minute load averages when the run
	// started: on a shared machine, other work skews every figure.
	LoadStart string
	// UDPBuffers is the most a socket may ask for (Linux rmem_max and
	// wmem_max): QUIC wants 7 MiB each way.
	UDPBuffers string
}

func environment() Env {
	e := Env{
		GoVersion:  runtime.Version(),
		OS:         runtime.GOOS,
		Arch:       runtime.GOARCH,
		NumCPU:     runtime.NumCPU(),
		GOMAXPROCS: runtime.GOMAXPROCS(0),
		CPU:        cpuModel(),
		LoadStart:  loadAverage(),
		UDPBuffers: udpBuffers(),
	}
	if out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output(); err == nil {
		e.Commit = strings.TrimSpace(string(out))
		if out, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(out) > 0 {
			e.Commit += "+dirty"
		}
	}
	return e
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// loadAverage returns the 1, 5 and 15 minute load averages, or "".
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

func udpBuffers() string {
	var parts []string
	for _, k := range []string{"rmem_max", "wmem_max"} {
		b, err := os.ReadFile("/proc/sys/net/core/" + k)
		if err != nil {
			return ""
		}
		parts = append(parts, "net.core."+k+" = "+strings.TrimSpace(string(b)))
	}
	return strings.Join(parts, ", ")
}

// Environment describes the machine and the code measured, for the bench
// module's other packages.
func Environment() Env { return environment() }
