package tcp

import (
	"fmt"
	"net"
	"time"
)

// WithHandshakeTimeout bounds the handshakes (TLS and wizard's, both
// sides); tests shorten it.
func WithHandshakeTimeout(d time.Duration) Option {
	return optionFunc(func(t *Transport) error {
		if d < 0 {
			return fmt.Errorf("WithHandshakeTimeout(%v): the timeout cannot be negative", d)
		}
		t.conf.Mux.HandshakeTimeout = d
		return nil
	})
}

// WithLocalAddr dials from the local IP ip; tests use it to call from
// several loopback addresses.
func WithLocalAddr(ip string) Option {
	return optionFunc(func(t *Transport) error {
		t.dialer.LocalAddr = &net.TCPAddr{IP: net.ParseIP(ip)}
		return nil
	})
}
