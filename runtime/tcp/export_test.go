package tcp

import (
	"fmt"
	"time"
)

// WithHandshakeTimeout bounds the handshakes (TLS and wizard's, both
// sides); tests shorten it.
func WithHandshakeTimeout(d time.Duration) Option {
	return optionFunc(func(t *Transport) error {
		if d < 0 {
			return fmt.Errorf("WithHandshakeTimeout(%v): the timeout cannot be negative", d)
		}
		t.mux.HandshakeTimeout = d
		return nil
	})
}
