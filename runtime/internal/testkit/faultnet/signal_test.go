//go:build linux

package faultnet_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/wizardmesh/wizard/runtime/internal/testkit/faultnet"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
)

// signalChildEnv makes TestSignalChild the child process of TestSignal.
const signalChildEnv = "FAULTNET_SIGNAL_CHILD"

// TestSignalChild is TestSignal's child: it makes a hub of two hosts,
// starts a process in one, prints the namespaces' names and the
// process's pid, and waits for its standard input to close.
func TestSignalChild(t *testing.T) {
	if os.Getenv(signalChildEnv) == "" {
		t.Skip("TestSignal's child process")
	}
	h := faultnet.New(t, 2)
	cmd := exec.Command("sleep", "600")
	if err := h.Start(h.Host(1), cmd); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("%s %s %d\n", h.Host(0).Name, h.Host(1).Name, cmd.Process.Pid)
	io.Copy(io.Discard, os.Stdin)
}

// TestSignal: a SIGTERM of the test process removes the namespaces of
// its open hubs and kills what they started, and the process still dies
// of the signal.
func TestSignal(t *testing.T) {
	if os.Getenv(signalChildEnv) != "" {
		t.Skip("in the child")
	}
	faultnet.Require(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestSignalChild$", "-test.v")
	cmd.Env = append(os.Environ(), signalChildEnv+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if f := strings.Fields(sc.Text()); len(f) == 3 && strings.HasPrefix(f[0], faultnet.Prefix) {
				lines <- sc.Text()
			} else if strings.Contains(sc.Text(), "SKIP") {
				lines <- "skip " + sc.Text()
			}
		}
		close(lines)
	}()
	line, ok := <-lines
	if !ok || strings.HasPrefix(line, "skip") {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("the child made no hub: %q %s", line, stderr.String())
	}
	f := strings.Fields(line)
	pid, _ := strconv.Atoi(f[2])
	cmd.Process.Signal(syscall.SIGTERM)
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGTERM {
		t.Errorf("the child ended with %v, want killed by SIGTERM", err)
	}
	for _, n := range f[:2] {
		if _, err := os.Stat("/run/netns/" + n); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("namespace %s left behind after SIGTERM (%v)", n, err)
			exec.Command("ip", "netns", "del", n).Run()
		}
	}
	testwait.Until(t, "the process started in the hub to die", func() bool {
		return syscall.Kill(pid, 0) == syscall.ESRCH
	})
}
