package gateway

import (
	"context"

	"github.com/wizardmesh/wizard/runtime"
)

// dial opens a mesh stream of pattern.
func (g *Gateway) dial(ctx context.Context, pattern string) (meshStream, error) {
	// Replaced by g.node.OpenStream once the runtime's streams land.
	return nil, runtime.NewError(runtime.CodeUnimplemented, "wizard: streams are not available yet")
}
