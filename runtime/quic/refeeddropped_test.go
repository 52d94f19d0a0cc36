package quic_test

import (
	"testing"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/link"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/transporttest"
	"github.com/wizardmesh/wizard/runtime/quic"
)

// TestRefeedAfterAnswersDropped: a call refed after other callers'
// answers filled the server's de-duplication table does not run again.
func TestRefeedAfterAnswersDropped(t *testing.T) {
	transporttest.RefeedAfterAnswersDropped(t, func(t testing.TB) runtime.Transport { return newTransport(t, quic.WithInsecureSelfSigned()) }, link.UDP, true)
}
