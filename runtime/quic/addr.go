package quic

import (
	"errors"
	"net"

	"github.com/wizardmesh/wizard/runtime"
)

var _ runtime.AddrChecker = (*Transport)(nil)

// CheckAddr returns an error when addr is not host:port, the form of the
// addresses the transport dials.
func (t *Transport) CheckAddr(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if port == "" {
		return errors.New("missing port number")
	}
	return nil
}
