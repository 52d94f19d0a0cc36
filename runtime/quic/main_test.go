package quic

import (
	"io"
	"log"
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	// quic-go prints a line of its own to the standard logger when it
	// cannot raise the UDP buffers; the transport reports that through its
	// logger (TestCheckBuffers), so keep the test output clean.
	os.Setenv("QUIC_GO_DISABLE_RECEIVE_BUFFER_WARNING", "true")
	// Nodes without a logger warn through slog.Default(), which writes
	// through the log package.
	log.SetOutput(io.Discard)
	os.Exit(m.Run())
}
