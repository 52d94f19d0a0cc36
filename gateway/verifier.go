package gateway

import (
	"context"
	"errors"

	"github.com/wizardmesh/wizard/gateway/auth"
)

// authVerifier is the gateway's view of an [auth.Verifier].
type authVerifier struct{ v auth.Verifier }

func (a authVerifier) verify(ctx context.Context, token string) (*auth.Identity, *apiError) {
	id, err := a.v.Verify(ctx, token)
	return a.result(id, err)
}

// onceVerifier is a verifier that can verify a token without caching it
// ([auth.JWT.VerifyOnce]).
type onceVerifier interface {
	VerifyOnce(ctx context.Context, token string) (*auth.Identity, error)
}

func (a authVerifier) verifyOnce(ctx context.Context, token string) (*auth.Identity, *apiError) {
	if o, ok := a.v.(onceVerifier); ok {
		id, err := o.VerifyOnce(ctx, token)
		return a.result(id, err)
	}
	return a.verify(ctx, token)
}

func (a authVerifier) result(id *auth.Identity, err error) (*auth.Identity, *apiError) {
	if err != nil {
		return nil, authError(err)
	}
	if id == nil {
		return nil, authError(auth.ErrRejected)
	}
	return id, nil
}

// ready passes on a verifier's readiness when it has one (keys loaded).
func (a authVerifier) ready() error {
	if r, ok := a.v.(interface{ Ready() error }); ok {
		return r.Ready()
	}
	return nil
}

// authError is the status table's row of a verification error: 401 with
// its challenge, 403, or 503 (fail closed).
func authError(err error) *apiError {
	ae := auth.ErrorOf(err)
	e := newAPIError(ae.Status(), ae.Code(), ae.Public())
	e.challenge = ae.WWWAuthenticate()
	if e.status == 503 {
		e.retryAfter = retryAfter
	}
	return e
}

// WithVerifier sets the verifier of bearer tokens, in place of the one
// the configuration's auth section describes.
func WithVerifier(v auth.Verifier) Option {
	return optionFunc(func(o *options) error {
		if v == nil {
			return errors.New("wizard: gateway: WithVerifier(nil): the verifier cannot be nil")
		}
		o.verifier = authVerifier{v}
		return nil
	})
}

// AuthStats returns the counters of the verifier's cache of verified
// tokens: hits and misses since the verifier was built (a reload builds
// the configuration's anew) and its size now. They are zero without a
// verifier, with a JWT verifier made with NoCache, or with one of
// [WithVerifier] that has no CacheStats method.
func (g *Gateway) AuthStats() auth.CacheStats {
	if a, ok := g.now().auth.(authVerifier); ok {
		if s, ok := a.v.(interface{ CacheStats() auth.CacheStats }); ok {
			return s.CacheStats()
		}
	}
	return auth.CacheStats{}
}
