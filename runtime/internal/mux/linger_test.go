package mux

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"slices"
	"testing"

	"github.com/wizardmesh/wizard/runtime/internal/testkit/leak"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
	"github.com/wizardmesh/wizard/runtime/internal/wire"
)

// closeRecorder reports what Serve does to its TCP connection's ends.
type closeRecorder struct {
	*net.TCPConn
	events chan string
}

func (c closeRecorder) CloseWrite() error {
	c.events <- "close write"
	return c.TCPConn.CloseWrite()
}

func (c closeRecorder) Close() error {
	c.events <- "close"
	return c.TCPConn.Close()
}

// TestShutdownLingers: a server shutting down closes only its sending side
// once its answers are written, and reads on until the client closes. The
// client here reads nothing until it has sent a request that crosses the
// goaway: had the server closed outright, that request would be answered
// with a reset, and the answer to the call that ran would be lost in the
// client's kernel.
func TestShutdownLingers(t *testing.T) {
	leak.Check(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	started, release := make(chan struct{}), make(chan struct{})
	h := func(ctx context.Context, req *wire.Frame) *wire.Frame {
		if string(req.Payload) == "slow" {
			close(started)
			<-release
		}
		return &wire.Frame{Type: wire.TypeResponse, Payload: []byte("done " + string(req.Payload))}
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	events := make(chan string, 4)
	served := make(chan error, 1)
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			served <- err
			return
		}
		served <- Serve(ctx, closeRecorder{nc.(*net.TCPConn), events}, h, Options{})
	}()

	// A client under the test's control: it reads only when told.
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	br := bufio.NewReader(conn)
	send := func(f *wire.Frame) {
		t.Helper()
		if _, err := conn.Write(wire.AppendFrame(nil, f)); err != nil {
			t.Fatal(err)
		}
	}
	if err := wire.WriteHandshake(conn); err != nil {
		t.Fatal(err)
	}
	if err := wire.ReadHandshake(br); err != nil {
		t.Fatal(err)
	}
	send(&wire.Frame{Type: wire.TypeRequest, ID: 1, Payload: []byte("slow")})
	testwait.Recv(t, started)
	stop()         // goaway, then drain
	close(release) // the call answers
	if ev := testwait.Recv(t, events); ev != "close write" {
		t.Fatalf("with its answers written, the server did %q to its connection, want to close its sending side only", ev)
	}
	send(&wire.Frame{Type: wire.TypeRequest, ID: 2, Payload: []byte("late")}) // crosses the goaway

	var got []string
	var f wire.Frame
	var buf []byte
	for {
		if buf, err = wire.ReadFrame(br, 0, &f, buf); err != nil {
			break
		}
		got = append(got, fmt.Sprintf("%v %d %s", f.Type, f.ID, f.Payload))
	}
	slices.Sort(got)
	if want := []string{"goaway 1 ", "response 1 done slow"}; !slices.Equal(got, want) || err != io.EOF {
		t.Errorf("the client read %q, then %v; want %q, then the end", got, err, want)
	}
	select {
	case ev := <-events:
		t.Errorf("the server did %q before the client closed", ev)
	default:
	}
	conn.Close()
	if ev := testwait.Recv(t, events); ev != "close" {
		t.Errorf("after the client closed: %q, want close", ev)
	}
	if err := testwait.Recv(t, served); err != nil {
		t.Errorf("Serve = %v", err)
	}
}
