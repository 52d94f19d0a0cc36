package bridge

import (
	"errors"
	"net"
)

// CheckHostPort returns an error when addr is not host:port, the form of
// the addresses the stream transports (tcp, quic) dial: their
// runtime.AddrChecker.
func CheckHostPort(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if port == "" {
		return errors.New("missing port number")
	}
	return nil
}
