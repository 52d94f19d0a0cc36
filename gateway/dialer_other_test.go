//go:build !unix

package gateway

import "net"

// smallBufferDialer is a plain dialer where socket options are not at hand.
func smallBufferDialer() *net.Dialer { return &net.Dialer{} }
