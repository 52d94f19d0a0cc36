package gateway

import (
	"context"

	"github.com/wizardmesh/wizard/gateway/auth"
)

// verifier verifies a bearer token; its errors carry their 401 (with a
// WWW-Authenticate challenge) or 503 (verification unavailable: fail
// closed).
type verifier interface {
	verify(ctx context.Context, token string) (*auth.Identity, *apiError)
}
