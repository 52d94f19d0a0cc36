package tcp_test

import (
	"testing"
	"time"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testlog"
	"github.com/wizardmesh/wizard/runtime/tcp"
)

// failedHandshakes is how many bad handshakes TestHandshakeLogLimited
// sends.
const failedHandshakes = 200

// TestHandshakeLogLimited (finding 8): 200 connections that fail the
// handshake give a bounded number of warnings, each naming the remote
// address, and a summary that counts the others; before, each gave a
// warning of its own without the address.
func TestHandshakeLogLimited(t *testing.T) {
	var logs testlog.Buffer
	srv := newServer(t, runtime.WithTransport(newTransport(t, tcp.WithLogger(logs.Logger()))))
	start := time.Now()
	for range failedHandshakes {
		r := dialRaw(t, srv.Addr())
		r.write([]byte("XXXX\x01\x00\x00\x00"))
		r.waitClosed()
		r.c.Close()
	}
	elapsed := time.Since(start)
	srv.Close() // logs what is still suppressed
	testlog.CheckLimited(t, logs.String(), "bad handshake magic", "127.0.0.1:", failedHandshakes, elapsed)
}
