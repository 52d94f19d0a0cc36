package gateway

import (
	"context"

	"github.com/wizardmesh/wizard/runtime"
)

var _ meshStream = (*runtime.ClientStream[any, runtime.Result])(nil)

// dial opens a mesh stream of pattern, bounded by ctx.
func (g *Gateway) dial(ctx context.Context, pattern string) (meshStream, error) {
	s, err := g.node.OpenStream(ctx, pattern)
	if err != nil {
		return nil, err
	}
	return s, nil
}
