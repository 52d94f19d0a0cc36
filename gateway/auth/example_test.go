package auth_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/wizardmesh/wizard/gateway/auth"
)

// A JWT verifier with an HMAC secret; the server reads the token, verifies
// it, checks the route's scopes, and maps failures through the error's
// Status and WWWAuthenticate.
func ExampleNewJWT() {
	secret := []byte("an example secret of at least 32 bytes")
	j, err := auth.NewJWT(auth.JWTOptions{
		Keys:     []auth.Key{{ID: "k1", Secret: secret}},
		Issuer:   "https://id.example.com",
		Audience: []string{"shop"},
	})
	if err != nil {
		panic(err)
	}
	defer j.Close()

	tok := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
		"sub": "u_1", "iss": "https://id.example.com", "aud": "shop",
		"exp": time.Now().Add(time.Hour).Unix(), "scope": "orders:read",
	})
	tok.Header["kid"] = "k1"
	signed, _ := tok.SignedString(secret)

	token, _ := auth.BearerToken("Bearer " + signed)
	id, err := j.Verify(context.Background(), token)
	fmt.Println(id.Subject, id.Scopes, err)

	err = auth.RequireScopes(id, []string{"orders:write"})
	var e *auth.Error
	if errors.As(err, &e) {
		fmt.Println(e.Status(), e.WWWAuthenticate())
	}

	_, err = j.Verify(context.Background(), signed[:len(signed)-4]+"AAAA")
	if errors.As(err, &e) {
		fmt.Println(e.Status(), e.WWWAuthenticate())
	}
	// Output:
	// u_1 [orders:read] <nil>
	// 403 Bearer error="insufficient_scope", error_description="insufficient scope", scope="orders:write"
	// 401 Bearer error="invalid_token", error_description="token signature is invalid"
}
