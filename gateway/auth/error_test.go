package auth_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/wizardmesh/wizard/gateway/auth"
	"github.com/wizardmesh/wizard/runtime"
)

func TestErrorMapping(t *testing.T) {
	tests := []struct {
		err    *auth.Error
		status int
		code   runtime.Code
		header string
	}{
		{auth.ErrMissingToken, 401, runtime.CodeUnauthenticated, `Bearer`},
		{auth.ErrMalformed, 401, runtime.CodeUnauthenticated, `Bearer error="invalid_token", error_description="malformed token"`},
		{auth.ErrAlgorithm, 401, runtime.CodeUnauthenticated, `Bearer error="invalid_token", error_description="token algorithm not allowed"`},
		{auth.ErrUnknownKey, 401, runtime.CodeUnauthenticated, `Bearer error="invalid_token", error_description="token signing key unknown"`},
		{auth.ErrSignature, 401, runtime.CodeUnauthenticated, `Bearer error="invalid_token", error_description="token signature is invalid"`},
		{auth.ErrExpired, 401, runtime.CodeUnauthenticated, `Bearer error="invalid_token", error_description="token expired"`},
		{auth.ErrNotYetValid, 401, runtime.CodeUnauthenticated, `Bearer error="invalid_token", error_description="token not valid yet"`},
		{auth.ErrIssuer, 401, runtime.CodeUnauthenticated, `Bearer error="invalid_token", error_description="token issuer not accepted"`},
		{auth.ErrAudience, 401, runtime.CodeUnauthenticated, `Bearer error="invalid_token", error_description="token audience not accepted"`},
		{auth.ErrClaims, 401, runtime.CodeUnauthenticated, `Bearer error="invalid_token", error_description="token claims are invalid"`},
		{auth.ErrRejected, 401, runtime.CodeUnauthenticated, `Bearer error="invalid_token", error_description="token rejected"`},
		{&auth.Error{Reason: auth.ReasonScope, Scopes: []string{"orders:write", "admin"}}, 403, runtime.CodePermissionDenied,
			`Bearer error="insufficient_scope", error_description="insufficient scope", scope="orders:write admin"`},
		{auth.ErrUnavailable, 503, runtime.CodeUnavailable, ``},
		{&auth.Error{Reason: auth.ReasonExpired, Message: "a \"quoted\"\\ message\n"}, 401, runtime.CodeUnauthenticated, `Bearer error="invalid_token", error_description="a quoted message"`},
	}
	for _, tt := range tests {
		t.Run(tt.err.Public(), func(t *testing.T) {
			got := []any{tt.err.Status(), tt.err.Code(), tt.err.WWWAuthenticate()}
			if diff := cmp.Diff([]any{tt.status, tt.code, tt.header}, got); diff != "" {
				t.Errorf("status, code, header (-want +got):\n%s", diff)
			}
			wrapped := fmt.Errorf("route x: %w", &auth.Error{Reason: tt.err.Reason, Message: "other"})
			if !errors.Is(wrapped, tt.err) {
				t.Errorf("errors.Is(%v, sentinel of %q) = false", wrapped, tt.err.Reason)
			}
			if auth.ErrorOf(wrapped).Reason != tt.err.Reason {
				t.Errorf("ErrorOf lost the reason")
			}
		})
	}
	if errors.Is(auth.ErrExpired, auth.ErrSignature) {
		t.Error("ErrExpired is ErrSignature")
	}
	if e := auth.ErrorOf(errors.New("boom")); e.Status() != 503 || e.Unwrap().Error() != "boom" {
		t.Errorf("ErrorOf(plain error) = %v, want a 503 wrapping it", e)
	}
	if auth.ErrorOf(nil) != nil {
		t.Error("ErrorOf(nil) != nil")
	}
}

func TestRequireScopes(t *testing.T) {
	id := &auth.Identity{Subject: "u", Scopes: []string{"a", "b"}}
	tests := []struct {
		name   string
		id     *auth.Identity
		scopes []string
		want   error
	}{
		{"none required", id, nil, nil},
		{"none required, no identity", nil, nil, nil},
		{"held", id, []string{"b", "a"}, nil},
		{"one missing", id, []string{"a", "c"}, auth.ErrInsufficientScope},
		{"no identity", nil, []string{"a"}, auth.ErrMissingToken},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := auth.RequireScopes(tt.id, tt.scopes)
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Fatalf("RequireScopes = %v, want %v", err, tt.want)
			}
			if tt.want == auth.ErrInsufficientScope {
				if diff := cmp.Diff(tt.scopes, auth.ErrorOf(err).Scopes); diff != "" {
					t.Errorf("scopes named (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func TestBearerToken(t *testing.T) {
	tests := []struct {
		header, token string
		want          error
	}{
		{"Bearer abc.def.ghi", "abc.def.ghi", nil},
		{"bearer abc-_~+/=", "abc-_~+/=", nil},
		{"  Bearer   abc  ", "abc", nil},
		{"", "", auth.ErrMissingToken},
		{"Basic dXNlcjpwYXNz", "", auth.ErrMissingToken},
		{"Bearer", "", auth.ErrMalformed},
		{"Bearer ", "", auth.ErrMalformed},
		{"Bearer a b", "", auth.ErrMalformed},
		{"Bearer ===", "", auth.ErrMalformed},
		{"Bearer a\"b", "", auth.ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.header, func(t *testing.T) {
			tok, err := auth.BearerToken(tt.header)
			if tok != tt.token || !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Errorf("BearerToken(%q) = %q, %v; want %q, %v", tt.header, tok, err, tt.token, tt.want)
			}
		})
	}
}

func FuzzBearerToken(f *testing.F) {
	for _, s := range []string{"Bearer abc", "bearer a.b.c", "Basic x", "", "Bearer ", "Bearer a b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		tok, err := auth.BearerToken(h)
		if (err == nil) == (tok == "") {
			t.Fatalf("BearerToken(%q) = %q, %v", h, tok, err)
		}
		if err != nil && auth.ErrorOf(err).Status() != 401 {
			t.Fatalf("status %d", auth.ErrorOf(err).Status())
		}
	})
}
