// Package transportname makes a wizard transport from its name, as the
// command line of wizard, the gateway's configuration and the examples'
// -transport flag give it: the one place that knows which names there
// are and what an unknown one is told.
package transportname

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"strings"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/quic"
	"github.com/wizardmesh/wizard/runtime/tcp"
)

// Config is what [New] makes a transport with. A field the chosen
// transport has no use for is ignored.
type Config struct {
	// Logger receives the transport's records (WithLogger); nil discards
	// them.
	Logger *slog.Logger
	// ServerTLS and ClientTLS, when set, are the transport's
	// WithServerTLS and WithClientTLS.
	ServerTLS, ClientTLS *tls.Config
	// Insecure lets tcp serve plain TCP on an address other than
	// loopback (tcp.WithInsecure), when ServerTLS is nil.
	Insecure bool
	// SelfSigned lets quic serve a throwaway self-signed certificate
	// where ServerTLS is nil, and accept any server's where ClientTLS is
	// nil (quic.WithInsecureSelfSigned): for development.
	SelfSigned bool
}

// transports are the names [New] knows, in the order messages list them.
var transports = []struct {
	name string
	new  func(Config) (runtime.Transport, error)
}{
	{"tcp", newTCP},
	{"quic", newQUIC},
}

// Names lists the names [New] takes, for a flag's help: "tcp or quic".
func Names() string {
	names := make([]string, len(transports))
	for i, t := range transports {
		names[i] = t.name
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// Check returns nil when [New] knows name, else the error New returns
// for it: `want tcp or quic, got "udp"`. The caller prefixes what the
// name came from (a flag, a configuration key).
func Check(name string) error {
	_, err := lookup(name)
	return err
}

// New returns the transport called name made with c, or Check's error
// for an unknown name.
func New(name string, c Config) (runtime.Transport, error) {
	newT, err := lookup(name)
	if err != nil {
		return nil, err
	}
	return newT(c)
}

func lookup(name string) (func(Config) (runtime.Transport, error), error) {
	for _, t := range transports {
		if t.name == name {
			return t.new, nil
		}
	}
	return nil, fmt.Errorf("want %s, got %q", Names(), name)
}

func newTCP(c Config) (runtime.Transport, error) {
	opts := []tcp.Option{tcp.WithLogger(c.Logger)}
	if c.ServerTLS != nil {
		opts = append(opts, tcp.WithServerTLS(c.ServerTLS))
	} else if c.Insecure {
		opts = append(opts, tcp.WithInsecure())
	}
	if c.ClientTLS != nil {
		opts = append(opts, tcp.WithClientTLS(c.ClientTLS))
	}
	t, err := tcp.New(opts...)
	if err != nil {
		return nil, err // not a nil *tcp.Transport in a non-nil interface
	}
	return t, nil
}

func newQUIC(c Config) (runtime.Transport, error) {
	opts := []quic.Option{quic.WithLogger(c.Logger)}
	if c.ServerTLS != nil {
		opts = append(opts, quic.WithServerTLS(c.ServerTLS))
	}
	if c.ClientTLS != nil {
		opts = append(opts, quic.WithClientTLS(c.ClientTLS))
	}
	if c.SelfSigned {
		opts = append(opts, quic.WithInsecureSelfSigned())
	}
	t, err := quic.New(opts...)
	if err != nil {
		return nil, err
	}
	return t, nil
}
