package microwizard

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/wizardmesh/wizard/runtime/pattern"
)

// Option configures a [Transport].
type Option interface{ apply(*Transport) error }

type optionFunc func(*Transport) error

func (f optionFunc) apply(t *Transport) error { return f(t) }

// WithPeer names a MicroWizard node that listens at addr ("host:port")
// with listen({type: 'tcp', pin}), and the pins it serves there: MicroWizard
// publishes no catalog, so the transport states them for it when the node
// pulls addr's catalog. Give the addresses to the node as discovery
// ([Transport.Discovery]). Pins are wizard patterns ("role:math,cmd:*").
func WithPeer(addr string, pins ...string) Option {
	return optionFunc(func(t *Transport) error {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return fmt.Errorf("WithPeer(%q): %w", addr, err)
		}
		if len(pins) == 0 {
			return fmt.Errorf("WithPeer(%q): no pins", addr)
		}
		ps := make([]string, 0, len(pins))
		for _, p := range pins {
			pt, err := pattern.Parse(p)
			if err != nil {
				return fmt.Errorf("WithPeer(%q): pin %q: %w", addr, p, err)
			}
			if pt.Len() == 0 {
				return fmt.Errorf("WithPeer(%q): pin %q is empty", addr, p)
			}
			ps = append(ps, pt.String())
		}
		if _, dup := t.peers[addr]; dup {
			return fmt.Errorf("WithPeer(%q): the address is given twice", addr)
		}
		t.peers[addr] = ps
		t.order = append(t.order, addr)
		return nil
	})
}

// WithLogger sets the logger of the transport's connections and
// listeners (bad lines, lost connections). By default Warn and above go
// to slog.Default().
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(t *Transport) error {
		if l == nil {
			return errors.New("WithLogger: nil logger")
		}
		t.log = l
		return nil
	})
}

// WithMaxLine bounds a line either way, in bytes (default 16 MiB).
// MicroWizard bounds none (a line is bounded by the largest string V8
// makes, about 512 MiB); the default takes the messages a MicroWizard
// fleet sends while it bounds what one connection holds. A longer line
// received is read to its end and dropped: a call is answered with a
// resource_exhausted error named RangeError, an answer fails its call
// with resource_exhausted, and the connection goes on. A longer call is
// refused before it is sent.
func WithMaxLine(n int) Option {
	return optionFunc(func(t *Transport) error {
		if n < 64 {
			return fmt.Errorf("WithMaxLine(%d): below 64 bytes", n)
		}
		t.maxLine = n
		return nil
	})
}

// WithMaxPending bounds, per connection, the calls waiting for an answer
// (calling; over Seneca's HTTP wire also the no-reply calls whose answers
// are still to come) and the requests being served (serving; at the
// bound the connection is not read until one ends). Default 1024.
func WithMaxPending(n int) Option {
	return optionFunc(func(t *Transport) error {
		if n < 1 {
			return fmt.Errorf("WithMaxPending(%d): below 1", n)
		}
		t.maxPending = n
		return nil
	})
}

// WithServeTimeout bounds a served request, which carries no deadline
// on MicroWizard's wire (default 5,555 ms, MicroWizard's client timeout).
func WithServeTimeout(d time.Duration) Option {
	return optionFunc(func(t *Transport) error {
		if d <= 0 {
			return fmt.Errorf("WithServeTimeout(%v): not positive", d)
		}
		t.serveTimeout = d
		return nil
	})
}

// WithKeepAlive sets how often a connection with no traffic is pinged
// ({"h":1}) and how long the answer may take before the connection is
// dropped (defaults MicroWizard's: 120 s and 5 s).
func WithKeepAlive(every, timeout time.Duration) Option {
	return optionFunc(func(t *Transport) error {
		if every <= 0 || timeout <= 0 {
			return fmt.Errorf("WithKeepAlive(%v, %v): not positive", every, timeout)
		}
		t.keepAlive, t.keepAliveTimeout = every, timeout
		return nil
	})
}

// WithSeneca makes the transport speak Seneca 3's seneca-transport over
// TCP instead of MicroWizard's protocol: requests {id, kind: "act",
// origin, track, act, sync}, answers {id, kind: "res", origin, accept,
// track, res | error}. id names this node's instance on that wire (in
// origin and track; "" picks a random one): a request whose track holds
// it has looped back and is not served, as Seneca refuses it.
func WithSeneca(id string) Option {
	return optionFunc(func(t *Transport) error {
		if strings.ContainsAny(id, "\n\r") {
			return fmt.Errorf("WithSeneca(%q): a line break in the id", id)
		}
		t.seneca = true
		t.senecaID = id
		return nil
	})
}

// WithSenecaHTTP makes the transport speak seneca-transport's HTTP wire
// (Seneca's type 'http' / 'web'): a call is a POST to /act whose body is
// the act and whose seneca-id, seneca-origin and seneca-track headers
// carry what the TCP wire puts in the line; the answer is the result
// (200) or the error (500, 503 for a refusal). id is as for
// [WithSeneca]; a looped request is answered 500 message_loop, as Seneca
// answers it over HTTP. The transport is then named "seneca-http".
func WithSenecaHTTP(id string) Option {
	return optionFunc(func(t *Transport) error {
		if err := WithSeneca(id).apply(t); err != nil {
			return fmt.Errorf("WithSenecaHTTP: %w", err)
		}
		t.http = true
		return nil
	})
}
