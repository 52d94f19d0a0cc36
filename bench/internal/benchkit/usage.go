package benchkit

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTick is the unit of utime and stime in /proc/PID/stat (USER_HZ,
// 100 on Linux whatever the kernel's own tick).
const clockTick = 10 * time.Millisecond

// CPU returns the user plus system CPU time process pid has used, all its
// threads together.
func CPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	d, err := ParseStatCPU(b)
	if err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return d, nil
}

// ParseStatCPU reads utime and stime (fields 14 and 15) from the text of
// /proc/PID/stat and returns their sum. The command name, field 2, is in
// parentheses and may hold spaces and parentheses itself, so fields count
// from the last ')'.
func ParseStatCPU(stat []byte) (time.Duration, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errors.New("process stat without a command name")
	}
	f := bytes.Fields(stat[i+1:]) // f[0] is field 3, the state
	if len(f) < 13 {
		return 0, fmt.Errorf("process stat with %d fields after the command name, want at least 13", len(f))
	}
	var sum time.Duration
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(string(s), 10, 64)
		if err != nil || n < 0 || n > int64(time.Duration(1<<62)/clockTick) {
			return 0, fmt.Errorf("process stat CPU field %q: want a count of clock ticks", s)
		}
		sum += time.Duration(n) * clockTick
	}
	return sum, nil
}

// Usage is what /proc says of a process: resident memory now and at its
// peak, and CPU time used.
type Usage struct {
	RSS, HWM int64         // bytes: VmRSS and VmHWM of /proc/PID/status
	CPU      time.Duration // utime + stime of /proc/PID/stat
}

// ReadUsage reads pid's Usage.
func ReadUsage(pid int) (Usage, error) {
	var u Usage
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return u, err
	}
	for l := range strings.SplitSeq(string(b), "\n") {
		k, v, ok := strings.Cut(l, ":")
		if !ok {
			continue
		}
		switch k {
		case "VmRSS":
			u.RSS = kib(v)
		case "VmHWM":
			u.HWM = kib(v)
		}
	}
	u.CPU, err = CPU(pid)
	return u, err
}

// kib parses " 1234 kB" into bytes (0 when it cannot).
func kib(v string) int64 {
	v = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB"))
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0
	}
	return n << 10
}
