package microwizard_test

import (
	"bufio"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/leak"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
	"github.com/wizardmesh/wizard/runtime/microwizard"
)

// pingServer listens on 127.0.0.1 and counts the keep-alive pings it
// reads, answering them when answer is set; it returns the address.
func pingServer(t *testing.T, answer bool, pings *atomic.Int32) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { ln.Close(); <-done })
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		go func() { <-t.Context().Done(); c.Close() }()
		sc := bufio.NewScanner(c)
		for sc.Scan() {
			if strings.TrimSpace(sc.Text()) == `{"h":1}` {
				pings.Add(1)
				if answer {
					c.Write([]byte("{\"h\":2}\n"))
				}
			}
		}
	}()
	return ln.Addr().String()
}

// TestKeepAlive: a silent connection is pinged; one whose peer answers
// stays, one whose peer does not is dropped, as MicroWizard's client
// drops it.
func TestKeepAlive(t *testing.T) {
	for _, answer := range []bool{true, false} {
		t.Run(map[bool]string{true: "answered", false: "unanswered"}[answer], func(t *testing.T) {
			leak.Check(t)
			var pings atomic.Int32
			addr := pingServer(t, answer, &pings)
			tr := newTransport(t, microwizard.WithKeepAlive(20*time.Millisecond, 200*time.Millisecond))
			c, err := tr.Dial(t.Context(), addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if !answer {
				testwait.Recv(t, c.Done())
				return
			}
			testwait.Until(t, "three pings answered", func() bool { return pings.Load() >= 3 })
			select {
			case <-c.Done():
				t.Fatal("a connection whose pings are answered was dropped")
			default:
			}
		})
	}
}

// TestDialRefused: a dial that fails matches runtime.ErrNotSent.
func TestDialRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, err = newTransport(t).Dial(t.Context(), addr)
	if !errors.Is(err, runtime.ErrNotSent) || !strings.Contains(err.Error(), "wizard: microwizard: dial "+addr) {
		t.Errorf("got %v, want a not-sent error naming the address", err)
	}
}

// TestOptions: invalid options fail New with an error naming them.
func TestOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		opt  microwizard.Option
		want string
	}{
		{"nil", nil, "option 1 of 1 is nil"},
		{"peer without port", microwizard.WithPeer("host", "a:1"), `WithPeer("host")`},
		{"peer without pins", microwizard.WithPeer("h:1"), "no pins"},
		{"bad pin", microwizard.WithPeer("h:1", "a:"), `pin "a:"`},
		{"small line", microwizard.WithMaxLine(10), "WithMaxLine(10)"},
		{"no pending", microwizard.WithMaxPending(0), "WithMaxPending(0)"},
		{"serve timeout", microwizard.WithServeTimeout(0), "WithServeTimeout(0s)"},
		{"keep-alive", microwizard.WithKeepAlive(0, time.Second), "WithKeepAlive"},
		{"logger", microwizard.WithLogger(nil), "WithLogger"},
		{"seneca id", microwizard.WithSeneca("a\nb"), "line break"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := microwizard.New(tc.opt)
			if err == nil || !strings.HasPrefix(err.Error(), "wizard: microwizard: ") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error naming %q", err, tc.want)
			}
		})
	}
	if _, err := microwizard.New(microwizard.WithPeer("h:1", "a:1"), microwizard.WithPeer("h:1", "b:1")); err == nil || !strings.Contains(err.Error(), "given twice") {
		t.Errorf("a peer given twice: got %v", err)
	}
}
