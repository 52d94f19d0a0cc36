package gateway

import (
	"context"
	"strings"

	"github.com/wizardmesh/wizard/gateway/auth"
	"github.com/wizardmesh/wizard/runtime"
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

// withCallMeta returns ctx whose calls carry the call's metadata: the
// request id and, for an authenticated request, the verified identity.
// It is the one place where the gateway sets metadata.
func withCallMeta(ctx context.Context, requestID string, id *auth.Identity) context.Context {
	if id == nil {
		return runtime.AppendMetadata(ctx, MetaRequestID, requestID)
	}
	if len(id.Scopes) == 0 {
		return runtime.AppendMetadata(ctx, MetaRequestID, requestID, MetaAuthSubject, id.Subject, MetaAuthIssuer, id.Issuer)
	}
	return runtime.AppendMetadata(ctx, MetaRequestID, requestID, MetaAuthSubject, id.Subject, MetaAuthIssuer, id.Issuer, MetaAuthScopes, strings.Join(id.Scopes, " "))
}
