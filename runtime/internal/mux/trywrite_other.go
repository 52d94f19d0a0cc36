//go:build !unix

package mux

import (
	"errors"
	"io"
)

// tryWriter writes to a socket without waiting; on this platform there is
// none, and every frame goes through the writer goroutine.
type tryWriter struct{}

func newTryWriter(io.ReadWriteCloser) *tryWriter { return nil }

func (*tryWriter) write([]byte) (int, error) { return 0, errors.ErrUnsupported }
