package bridge

import (
	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/wire"
)

// ToWire returns m as frame metadata, without a copy, for a transport
// that encodes frames of its own (a broker's).
func ToWire(m []runtime.MetaPair) []wire.Meta { return toWire(m) }

// FromWire returns frame metadata as a message's, without a copy.
func FromWire(m []wire.Meta) []runtime.MetaPair { return fromWire(m) }
