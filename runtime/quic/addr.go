package quic

import (
	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/bridge"
)

var _ runtime.AddrChecker = (*Transport)(nil)

// CheckAddr returns an error when addr is not host:port, the form of the
// addresses the transport dials.
func (t *Transport) CheckAddr(addr string) error { return bridge.CheckHostPort(addr) }
