package bridge

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"sync"

	"github.com/wizardmesh/wizard/runtime"
)

// identityKey is the context key of a connection's caller identity.
type identityKey struct{}

// WithTLSIdentity returns ctx carrying the identity of the caller at the
// other end of state's connection: the SHA-256 fingerprint of the first
// certificate it presented, computed once, on first use (the handshake
// may not have run yet when the connection is accepted). Requests served
// with ctx give it to the node as [runtime.Message.Identity].
func WithTLSIdentity(ctx context.Context, state func() tls.ConnectionState) context.Context {
	return context.WithValue(ctx, identityKey{}, sync.OnceValue(func() string {
		certs := state().PeerCertificates
		if len(certs) == 0 {
			return ""
		}
		sum := sha256.Sum256(certs[0].Raw)
		return string(sum[:])
	}))
}

// identity returns the caller identity ctx carries, or "".
func identity(ctx context.Context) string {
	if f, ok := ctx.Value(identityKey{}).(func() string); ok {
		return f()
	}
	return ""
}

// remoteKey is the context key of a connection's [runtime.Remote].
type remoteKey struct{}

// WithRemote returns ctx carrying r, the calling end of the connection
// whose requests are served with ctx: they give it to the node as
// [runtime.Message.Remote].
func WithRemote(ctx context.Context, r *runtime.Remote) context.Context {
	return context.WithValue(ctx, remoteKey{}, r)
}

func remoteOf(ctx context.Context) *runtime.Remote {
	r, _ := ctx.Value(remoteKey{}).(*runtime.Remote)
	return r
}

// VerifiedLeaf returns the leaf certificate of the peer of cs when the
// TLS configuration verified it (a chain to a trusted root), else nil: a
// certificate taken without verification proves nothing.
func VerifiedLeaf(cs tls.ConnectionState) *x509.Certificate {
	if len(cs.VerifiedChains) == 0 || len(cs.PeerCertificates) == 0 {
		return nil
	}
	return cs.PeerCertificates[0]
}
