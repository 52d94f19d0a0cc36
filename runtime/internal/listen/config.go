package listen

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/wizardmesh/wizard/runtime/internal/bridge"
	"github.com/wizardmesh/wizard/runtime/internal/connset"
	"github.com/wizardmesh/wizard/runtime/internal/mux"
)

// Config is what the options both stream transports take set. Zero
// values mean the defaults.
type Config struct {
	ServerTLS, ClientTLS *tls.Config
	// Insecure is tcp's WithInsecure and quic's WithInsecureSelfSigned.
	Insecure bool
	// Mux holds the frame size, keep-alive, logger and per-connection
	// bounds of every connection, served or dialled.
	Mux mux.Options

	MaxConns, MaxConnsPerIP int
	IdleTimeout             time.Duration
}

// Limits returns a listener's connection limits, the defaults resolved.
func (c *Config) Limits() connset.Limits {
	return connset.Resolve(c.MaxConns, c.MaxConnsPerIP, c.IdleTimeout)
}

// Option sets a field of a [Config] once it has checked its argument; its
// error names the transport's option ("WithMaxConns(-1): ...").
type Option func(*Config) error

// Apply applies opts to c, in order, with apply, for the New of the
// transport called name; then it checks what no option can alone. Its
// error starts "wizard: <name>: " and names a nil option by its place or
// the option whose argument is invalid.
func Apply[O comparable](name string, c *Config, opts []O, apply func(O) error) error {
	var none O
	for i, o := range opts {
		if o == none {
			return fmt.Errorf("wizard: %s: option %d of %d is nil", name, i+1, len(opts))
		}
		if err := apply(o); err != nil {
			return fmt.Errorf("wizard: %s: %w", name, err)
		}
	}
	if err := bridge.CheckMaxConnsPerIP(c.MaxConnsPerIP, c.MaxConns); err != nil {
		return fmt.Errorf("wizard: %s: %w", name, err)
	}
	return nil
}

// ServerTLS is WithServerTLS: cfg must present a certificate; for a nil
// cfg the error ends with ifNil, which says what the transport does
// without one.
func ServerTLS(cfg *tls.Config, ifNil string) Option {
	return func(c *Config) error {
		if cfg == nil {
			return errors.New("WithServerTLS(nil): no configuration; " + ifNil)
		}
		if err := bridge.CheckServerTLS(cfg); err != nil {
			return err
		}
		c.ServerTLS = cfg
		return nil
	}
}

// ClientTLS is WithClientTLS; for a nil cfg the error ends with ifNil.
func ClientTLS(cfg *tls.Config, ifNil string) Option {
	return func(c *Config) error {
		if cfg == nil {
			return errors.New("WithClientTLS(nil): no configuration; " + ifNil)
		}
		c.ClientTLS = cfg
		return nil
	}
}

// Insecure is tcp's WithInsecure and quic's WithInsecureSelfSigned.
func Insecure() Option {
	return func(c *Config) error {
		c.Insecure = true
		return nil
	}
}

// MaxConns is WithMaxConns.
func MaxConns(n int) Option {
	return func(c *Config) error {
		if err := bridge.CheckMaxConns(n); err != nil {
			return err
		}
		c.MaxConns = n
		return nil
	}
}

// MaxConnsPerIP is WithMaxConnsPerIP; [Apply] checks it against
// MaxConns.
func MaxConnsPerIP(n int) Option {
	return func(c *Config) error {
		if err := bridge.CheckMaxConnsPerIP(n, 0); err != nil {
			return err
		}
		c.MaxConnsPerIP = n
		return nil
	}
}

// IdleTimeout is WithIdleTimeout.
func IdleTimeout(d time.Duration) Option {
	return func(c *Config) error {
		if err := bridge.CheckIdleTimeout(d); err != nil {
			return err
		}
		c.IdleTimeout = d
		return nil
	}
}

// MaxFrameSize is WithMaxFrameSize.
func MaxFrameSize(n int) Option {
	return func(c *Config) error {
		if err := bridge.CheckMaxFrameSize(n); err != nil {
			return err
		}
		c.Mux.MaxFrameSize = n
		return nil
	}
}

// KeepAlive is WithKeepAlive.
func KeepAlive(interval, timeout time.Duration) Option {
	return func(c *Config) error {
		if err := bridge.CheckKeepAlive(interval, timeout); err != nil {
			return err
		}
		c.Mux.KeepAlive, c.Mux.KeepAliveTimeout = interval, timeout
		return nil
	}
}

// Logger is WithLogger.
func Logger(l *slog.Logger) Option {
	return func(c *Config) error {
		c.Mux.Logger = l
		return nil
	}
}

// MaxConnInFlight is WithMaxConnInFlight.
func MaxConnInFlight(n int) Option {
	return func(c *Config) error {
		if err := bridge.CheckMaxConnInFlight(n); err != nil {
			return err
		}
		c.Mux.MaxInFlight = n
		return nil
	}
}

// MaxConnQueued is WithMaxConnQueued.
func MaxConnQueued(n int) Option {
	return func(c *Config) error {
		if err := bridge.CheckMaxConnQueued(n); err != nil {
			return err
		}
		c.Mux.MaxQueued = n
		return nil
	}
}

// ServeTimeout is WithServeTimeout.
func ServeTimeout(d time.Duration) Option {
	return func(c *Config) error {
		if err := bridge.CheckServeTimeout(d); err != nil {
			return err
		}
		c.Mux.ServeTimeout = d
		return nil
	}
}
