package gateway

import (
	"errors"
	"log/slog"
	"time"
)

// Option configures a [Gateway] beyond its configuration file.
type Option interface{ apply(*options) error }

type options struct {
	log      *slog.Logger
	certFile string
	keyFile  string
	grace    time.Duration
	bodyWait time.Duration
	verifier verifier // tests, and the configuration's auth once built
}

type optionFunc func(*options) error

func (f optionFunc) apply(o *options) error { return f(o) }

// WithLogger sets the gateway's logger: the access log at Info (one
// record a request, "gateway: request"), and its warnings and errors. By
// default Warn and above go to slog.Default().
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(o *options) error {
		if l == nil {
			return errors.New("wizard: gateway: WithLogger(nil): the logger cannot be nil (slog.New(slog.DiscardHandler) discards)")
		}
		o.log = l
		return nil
	})
}

// WithTLSFiles serves HTTPS (and wss) with the certificate and key of
// the PEM files certFile and keyFile, read at [Gateway.Serve].
func WithTLSFiles(certFile, keyFile string) Option {
	return optionFunc(func(o *options) error {
		if (certFile == "") != (keyFile == "") {
			return errors.New("wizard: gateway: WithTLSFiles: give both the certificate and the key file, or neither")
		}
		o.certFile, o.keyFile = certFile, keyFile
		return nil
	})
}

// WithShutdownGrace bounds how long [Gateway.Shutdown] waits for requests
// and WebSocket connections to drain (default 10s; its context may end it
// sooner).
func WithShutdownGrace(d time.Duration) Option {
	return optionFunc(func(o *options) error {
		if d < 0 {
			return errors.New("wizard: gateway: WithShutdownGrace: the grace period cannot be negative")
		}
		o.grace = d
		return nil
	})
}

// WithReadBodyTimeout bounds reading a request's body, counted from the
// end of its headers (default 30s, or the configuration's
// server.read_body_timeout): a body still arriving then is answered 408
// and its connection closed, so a client that trickles a body cannot
// hold a connection.
func WithReadBodyTimeout(d time.Duration) Option {
	return optionFunc(func(o *options) error {
		if d < 0 {
			return errors.New("wizard: gateway: WithReadBodyTimeout: the timeout cannot be negative")
		}
		o.bodyWait = d
		return nil
	})
}
