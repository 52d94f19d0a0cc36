package bridge

import (
	"crypto/tls"
	"errors"
	"fmt"
	"time"

	"github.com/wizardmesh/wizard/runtime/internal/connset"
	"github.com/wizardmesh/wizard/runtime/internal/mux"
	"github.com/wizardmesh/wizard/runtime/internal/wire"
)

// minKeepAlive is the shortest ping interval and ping timeout the stream
// transports' WithKeepAlive accepts: pings more frequent, or answers
// expected sooner, would flood the peer or fail healthy connections.
const minKeepAlive = 10 * time.Millisecond

// CheckMaxFrameSize checks the argument of the transports'
// WithMaxFrameSize: 0 (the default) or a valid frame size.
func CheckMaxFrameSize(n int) error {
	if n == 0 || (n >= wire.MinFrameSize && uint64(n) <= wire.MaxFrameSize) {
		return nil
	}
	return fmt.Errorf("WithMaxFrameSize(%d): want 0 for the default (%d MiB) or %d to %d bytes",
		n, wire.DefaultMaxFrameSize>>20, wire.MinFrameSize, uint64(wire.MaxFrameSize))
}

// CheckKeepAlive checks the arguments of the transports' WithKeepAlive:
// an interval that is negative (no pings), 0 (the default) or at least
// minKeepAlive, and a timeout that is 0 (the default) or at least
// minKeepAlive.
func CheckKeepAlive(interval, timeout time.Duration) error {
	switch {
	case interval > 0 && interval < minKeepAlive:
		return fmt.Errorf("WithKeepAlive(%v, %v): the interval is below %v; want a negative interval for no pings, 0 for the default (%v) or at least %v",
			interval, timeout, minKeepAlive, mux.DefaultKeepAlive, minKeepAlive)
	case timeout < 0:
		return fmt.Errorf("WithKeepAlive(%v, %v): the timeout cannot be negative; want 0 for the default (%v) or at least %v",
			interval, timeout, mux.DefaultKeepAliveTimeout, minKeepAlive)
	case timeout > 0 && timeout < minKeepAlive:
		return fmt.Errorf("WithKeepAlive(%v, %v): the timeout is below %v; want 0 for the default (%v) or at least %v",
			interval, timeout, minKeepAlive, mux.DefaultKeepAliveTimeout, minKeepAlive)
	}
	return nil
}

// CheckServerTLS checks the argument of the transports' WithServerTLS:
// a configuration that can present a certificate. What it says when cfg
// is nil depends on the transport, so the caller checks that first.
func CheckServerTLS(cfg *tls.Config) error {
	if len(cfg.Certificates) == 0 && cfg.GetCertificate == nil && cfg.GetConfigForClient == nil {
		return errors.New("WithServerTLS: the configuration has no certificate: set Certificates, GetCertificate or GetConfigForClient")
	}
	return nil
}

// minIdleTimeout is the shortest idle timeout the transports'
// WithIdleTimeout accepts.
const minIdleTimeout = 10 * time.Millisecond

// CheckMaxConns checks the argument of the transports' WithMaxConns: 0
// (the default) or a positive number.
func CheckMaxConns(n int) error {
	if n < 0 {
		return fmt.Errorf("WithMaxConns(%d): want 0 for the default (half the file-descriptor limit, at most 4096) or a positive number", n)
	}
	return nil
}

// CheckMaxConnsPerIP checks the argument of the transports'
// WithMaxConnsPerIP: 0 (the default) or a positive number, at most
// maxConns when that is set.
func CheckMaxConnsPerIP(n, maxConns int) error {
	switch {
	case n < 0:
		return fmt.Errorf("WithMaxConnsPerIP(%d): want 0 for the default (a quarter of the maximum) or a positive number", n)
	case maxConns > 0 && n > maxConns:
		return fmt.Errorf("WithMaxConnsPerIP(%d): above WithMaxConns(%d)", n, maxConns)
	}
	return nil
}

// CheckIdleTimeout checks the argument of the transports'
// WithIdleTimeout: negative (none), 0 (the default) or at least
// minIdleTimeout.
func CheckIdleTimeout(d time.Duration) error {
	if d > 0 && d < minIdleTimeout {
		return fmt.Errorf("WithIdleTimeout(%v): want 0 for the default (%v), a negative value for none, or at least %v", d, connset.DefaultIdle, minIdleTimeout)
	}
	return nil
}

// CheckMaxConnInFlight checks the argument of the transports'
// WithMaxConnInFlight: 0 (the default) or a positive bound.
func CheckMaxConnInFlight(n int) error {
	if n < 0 {
		return fmt.Errorf("WithMaxConnInFlight(%d): want 0 for the default (%d) or at least 1", n, mux.DefaultMaxInFlight)
	}
	return nil
}

// CheckMaxConnQueued checks the argument of the transports'
// WithMaxConnQueued: 0 (the default) or a positive number of bytes.
func CheckMaxConnQueued(n int) error {
	if n < 0 {
		return fmt.Errorf("WithMaxConnQueued(%d): want 0 for the default (%d MiB) or at least 1 byte", n, mux.DefaultMaxQueued>>20)
	}
	return nil
}

// minServeTimeout is the shortest deadline WithServeTimeout accepts.
const minServeTimeout = time.Millisecond

// CheckServeTimeout checks the argument of the transports'
// WithServeTimeout: 0 (the default) or at least minServeTimeout.
func CheckServeTimeout(d time.Duration) error {
	if d < 0 || d > 0 && d < minServeTimeout {
		return fmt.Errorf("WithServeTimeout(%v): want 0 for the default (%v) or at least %v", d, mux.DefaultServeTimeout, minServeTimeout)
	}
	return nil
}
