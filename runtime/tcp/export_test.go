package tcp

import "time"

// WithHandshakeTimeout bounds the handshakes (TLS and wizard's, both
// sides); tests shorten it.
func WithHandshakeTimeout(d time.Duration) Option {
	return optionFunc(func(t *Transport) { t.mux.HandshakeTimeout = d })
}
