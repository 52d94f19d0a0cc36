package gateway

import (
	"context"
	"strings"

	"github.com/wizardmesh/wizard/gateway/auth"
)

// The call metadata the gateway sets on every call it makes into the mesh
// (see the package doc). Only the gateway writes them: nothing a client
// sends becomes metadata.
const (
	MetaRequestID   = "request-id"
	MetaAuthSubject = "auth-subject"
	MetaAuthIssuer  = "auth-issuer"
	MetaAuthScopes  = "auth-scopes"
)

// callMetaKey keys the metadata on a call's context until the runtime
// carries call metadata itself.
type callMetaKey struct{}

// withCallMeta returns ctx carrying the call's metadata: the request id
// and, for an authenticated request, the verified identity. It is the one
// place where the gateway sets metadata.
func withCallMeta(ctx context.Context, requestID string, id *auth.Identity) context.Context {
	kv := make([]string, 0, 8)
	kv = append(kv, MetaRequestID, requestID)
	if id != nil {
		kv = append(kv, MetaAuthSubject, id.Subject, MetaAuthIssuer, id.Issuer)
		if len(id.Scopes) > 0 {
			kv = append(kv, MetaAuthScopes, strings.Join(id.Scopes, " "))
		}
	}
	return context.WithValue(ctx, callMetaKey{}, kv)
}

// callMeta returns the metadata withCallMeta put on ctx, as key, value
// pairs.
func callMeta(ctx context.Context) []string {
	kv, _ := ctx.Value(callMetaKey{}).([]string)
	return kv
}
