// Package transport picks a wizard transport by name for the example
// commands' -transport flag.
package transport

import (
	"fmt"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/quic"
	"github.com/wizardmesh/wizard/runtime/tcp"
)

// Names lists the accepted names, for flag help.
const Names = "tcp, quic"

// New returns the transport called name.
func New(name string) (runtime.Transport, error) {
	switch name {
	case "tcp":
		return tcp.New(), nil
	case "quic":
		// A development setup: a throwaway self-signed certificate and no
		// verification. Production sets quic.WithServerTLS/WithClientTLS.
		return quic.New(quic.WithInsecureSelfSigned()), nil
	}
	return nil, fmt.Errorf("unknown transport %q (want one of: %s)", name, Names)
}
