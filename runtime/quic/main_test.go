package quic

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	// quic-go prints a line of its own to the standard logger when it
	// cannot raise the UDP buffers; the transport reports that through its
	// logger (TestCheckBuffers), so keep the test output clean.
	os.Setenv("QUIC_GO_DISABLE_RECEIVE_BUFFER_WARNING", "true")
	os.Exit(m.Run())
}
