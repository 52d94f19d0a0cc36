// Package transport picks a wizard transport by name for the example
// commands' -transport flag.
package transport

import (
	"fmt"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/tcp"
)

// Names lists the accepted names, for flag help.
const Names = "tcp"

// New returns the transport called name.
func New(name string) (runtime.Transport, error) {
	switch name {
	case "tcp":
		return tcp.New(), nil
	}
	return nil, fmt.Errorf("unknown transport %q (want one of: %s)", name, Names)
}
