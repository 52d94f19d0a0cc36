package config

import (
	"testing"
	"time"
)

// TestTokenCacheBounds: the largest accepted bounds and the smallest
// positive ones load as written; absent sections mean the defaults (nil).
func TestTokenCacheBounds(t *testing.T) {
	for _, tc := range []struct {
		name, auth string
		check      func(t *testing.T, a Auth)
	}{
		{"jwt at the bounds", `  jwt: {keys: [k.pem], algorithms: [ES256], cache: {entries: 1, bytes: 1024GiB}}`, func(t *testing.T, a Auth) {
			if c := a.JWT.Cache; c == nil || c.Entries != 1 || c.Bytes != 1<<40 || c.Off {
				t.Errorf("cache %+v", c)
			}
		}},
		{"jwt off", `  jwt: {keys: [k.pem], algorithms: [ES256], cache: {off: true}}`, func(t *testing.T, a Auth) {
			if c := a.JWT.Cache; c == nil || !c.Off {
				t.Errorf("cache %+v", c)
			}
		}},
		{"jwt without", `  jwt: {keys: [k.pem], algorithms: [ES256]}`, func(t *testing.T, a Auth) {
			if a.JWT.Cache != nil {
				t.Errorf("cache %+v, want nil (the defaults)", a.JWT.Cache)
			}
		}},
		{"delegate", `  delegate: {pattern: "role:auth,cmd:verify", cache: {entries: 2, bytes: 1B, max_ttl: 1ns}}`, func(t *testing.T, a Auth) {
			if c := a.Delegate.Cache; c == nil || c.Entries != 2 || c.Bytes != 1 || c.MaxTTL != time.Nanosecond {
				t.Errorf("cache %+v", c)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := "auth:\n" + tc.auth + "\nroutes:\n  - {method: GET, path: \"/a\", pattern: \"role:a\"}\n"
			c, err := Parse("gateway.yaml", []byte(src))
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, c.Auth)
		})
	}
}
