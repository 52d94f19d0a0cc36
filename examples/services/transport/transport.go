// Package transport picks a wizard transport by name for the example
// commands' -transport flag.
package transport

import (
	"fmt"
	"log/slog"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/quic"
	"github.com/wizardmesh/wizard/runtime/tcp"
)

// Names lists the accepted names, for flag help.
const Names = "tcp, quic"

// New returns the transport called name, logging to log (nil: nowhere).
func New(name string, log *slog.Logger) (runtime.Transport, error) {
	switch name {
	case "tcp":
		t, err := tcp.New(tcp.WithLogger(log))
		if err != nil {
			return nil, err
		}
		return t, nil
	case "quic":
		// A development setup: a throwaway self-signed certificate and no
		// verification. Production sets quic.WithServerTLS/WithClientTLS.
		t, err := quic.New(quic.WithInsecureSelfSigned(), quic.WithLogger(log))
		if err != nil {
			return nil, err
		}
		return t, nil
	}
	return nil, fmt.Errorf("unknown transport %q (want one of: %s)", name, Names)
}
