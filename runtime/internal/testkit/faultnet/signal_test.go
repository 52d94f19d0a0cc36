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
	"time"

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
// of the signal; a SIGINT the process was started ignoring (a background
// job of a shell) does the same, and the process exits with status 130.
func TestSignal(t *testing.T) {
	if os.Getenv(signalChildEnv) != "" {
		t.Skip("in the child")
	}
	faultnet.Require(t)
	t.Run("SIGTERM", func(t *testing.T) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestSignalChild$", "-test.v")
		signalChild(t, cmd, syscall.SIGTERM, func(ws syscall.WaitStatus) bool { return ws.Signal() == syscall.SIGTERM })
	})
	t.Run("ignored SIGINT", func(t *testing.T) {
		// The shell execs the child with SIGINT ignored, which it inherits.
		cmd := exec.Command("sh", "-c", `trap "" INT; exec "$0" -test.run='^TestSignalChild$' -test.v`, os.Args[0])
		signalChild(t, cmd, syscall.SIGINT, func(ws syscall.WaitStatus) bool { return ws.Exited() && ws.ExitStatus() == 130 })
	})
}

// signalChild runs cmd, TestSignalChild, sends it sig once its hub is
// made, and checks how it ended, that the hub's namespaces are gone and
// the process started in it is dead.
func signalChild(t *testing.T, cmd *exec.Cmd, sig syscall.Signal, ended func(syscall.WaitStatus) bool) {
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
			}
		}
		close(lines)
	}()
	line, ok := <-lines
	if !ok {
		cmd.Wait()
		t.Fatalf("the child made no hub: %s", stderr.String())
	}
	f := strings.Fields(line)
	pid, _ := strconv.Atoi(f[2])
	cmd.Process.Signal(sig)
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	select {
	case err = <-waited:
	case <-time.After(testwait.Guard):
		cmd.Process.Kill()
		<-waited
		t.Fatalf("the child still ran %v after %v", testwait.Guard, sig)
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || !ended(ee.Sys().(syscall.WaitStatus)) {
		t.Errorf("the child ended with %v after %v", err, sig)
	}
	for _, n := range f[:2] {
		if _, err := os.Stat("/run/netns/" + n); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("namespace %s left behind after %v (%v)", n, sig, err)
			exec.Command("ip", "netns", "del", n).Run()
		}
	}
	testwait.Until(t, "the process started in the hub to die", func() bool {
		return syscall.Kill(pid, 0) == syscall.ESRCH
	})
}
