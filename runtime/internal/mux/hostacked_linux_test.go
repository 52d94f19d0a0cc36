//go:build linux && !386

package mux

import (
	"net"
	"testing"
	"time"
)

// TestHostAckedTCP: over loopback TCP, bytes written to a peer whose
// process never reads are acknowledged by its kernel; once the peer has
// closed its end, the connection is no longer established and nothing
// counts.
func TestHostAckedTCP(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c // held, never read
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	peer := <-accepted
	if hostAcked(nopCloser{}, time.Hour) {
		t.Error("hostAcked of a stream without a socket = true")
	}
	if _, err := c.Write(make([]byte, 1000)); err != nil {
		t.Fatal(err)
	}
	guard := time.Now().Add(10 * time.Second)
	for !hostAcked(c.(*net.TCPConn), time.Nanosecond) {
		if time.Now().After(guard) {
			t.Fatal("the bytes written were not acknowledged within 10s")
		}
		time.Sleep(time.Millisecond) // polling, under the guard
	}
	peer.Close()
	for hostAcked(c.(*net.TCPConn), time.Hour) {
		if time.Now().After(guard) {
			t.Fatal("the connection whose peer closed its end still counts after 10s")
		}
		time.Sleep(time.Millisecond) // polling, under the guard
	}
}

type nopCloser struct{}

func (nopCloser) Read([]byte) (int, error)  { return 0, nil }
func (nopCloser) Write([]byte) (int, error) { return 0, nil }
func (nopCloser) Close() error              { return nil }
