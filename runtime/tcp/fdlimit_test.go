//go:build unix

package tcp_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testlog"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/transporttest"
	"github.com/wizardmesh/wizard/runtime/internal/wire"
	"github.com/wizardmesh/wizard/runtime/tcp"
)

// fdServerEnv makes the test binary a server process for TestFDLimit.
const fdServerEnv = "WIZARD_TEST_FD_SERVER"

// childFDLimit is the file-descriptor limit of TestFDLimit's server: a
// few dozen connections exhaust it.
const childFDLimit = 64

// TestMain makes the test binary TestFDLimit's server process when
// fdServerEnv is set; otherwise it runs the tests.
func TestMain(m *testing.M) {
	if os.Getenv(fdServerEnv) != "" {
		if err := serveFewFDs(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	// Nodes without a logger warn through slog.Default(), which writes
	// through the log package: keep the test output clean.
	log.SetOutput(io.Discard)
	os.Exit(m.Run())
}

// serveFewFDs is TestFDLimit's server: with childFDLimit file
// descriptors, it serves role:fd,cmd:ping on 127.0.0.1 with the
// transport's default limits, prints its address and serves until its
// standard input closes; then it writes its log to standard error.
func serveFewFDs() error {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return err
	}
	lim.Cur = childFDLimit
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return err
	}
	var logs testlog.Buffer
	tr, err := tcp.New(tcp.WithLogger(logs.Logger()))
	if err != nil {
		return err
	}
	n, err := runtime.New(runtime.WithTransport(tr), runtime.WithListen("127.0.0.1:0"))
	if err != nil {
		return err
	}
	defer n.Close()
	if err := n.Add("role:fd,cmd:ping", func(ctx context.Context, r runtime.Request) (any, error) { return "pong", nil }); err != nil {
		return err
	}
	fmt.Println(n.Addr())
	io.Copy(io.Discard, os.Stdin)
	fmt.Fprint(os.Stderr, logs.String())
	return nil
}

// TestFDLimit (finding 4): an attacker opens connections to a server
// whose process has 64 file descriptors, completes the handshake on each
// and holds them idle; a real caller must still connect and call. Without
// a connection limit the server ran out of descriptors ("accept4: too many
// open files") and the caller never got in; with the default limits (32
// connections, 8 per IP: every connection here comes from 127.0.0.1) each
// newcomer takes the place of the attacker's oldest.
func TestFDLimit(t *testing.T) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), fdServerEnv+"=1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stop := sync.OnceValue(func() error {
		stdin.Close()
		return cmd.Wait()
	})
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			t.Logf("server's log:\n%s", stderr.String())
		}
	})
	lines := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		lines <- strings.TrimSpace(line)
		io.Copy(io.Discard, stdout)
	}()
	addr := testwait.Recv(t, lines)
	if _, err := net.ResolveTCPAddr("tcp", addr); err != nil {
		t.Fatalf("the server printed %q, not its address", addr)
	}

	// Twice as many connections as the server has descriptors: each one
	// shakes hands, then stays idle.
	held := 0
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range 2 * childFDLimit {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		if _, err := c.Write([]byte(wire.Magic + "\x01\x00\x00\x00")); err != nil {
			break
		}
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		if err := wire.ReadHandshake(bufio.NewReader(c)); err != nil {
			break // the server did not accept it
		}
		held++
	}
	t.Logf("%d connections shook hands", held)

	cl := transporttest.NewNode(t, runtime.WithTransport(newTransport(t)), runtime.WithDiscovery(runtime.StaticPeers(addr)))
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := cl.WaitFor(ctx, "role:fd,cmd:ping"); err != nil {
		t.Fatalf("a real caller could not reach the server: %v", err)
	}
	res, err := cl.ActE(ctx, "role:fd,cmd:ping", nil)
	if err != nil || res.Value() != "pong" {
		t.Fatalf("call = %v, %v; want pong", res.Value(), err)
	}
	for _, c := range conns { // or the server's graceful shutdown waits for them
		c.Close()
	}
	cl.Close()
	if err := stop(); err != nil {
		t.Fatalf("the server: %v", err)
	}
	if log := stderr.String(); strings.Contains(log, "too many open files") || !strings.Contains(log, "connection closed to make room") {
		t.Errorf("the server's log shows no room made, or running out of descriptors")
	}
}
