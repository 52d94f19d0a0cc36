package auth_test

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/wizardmesh/wizard/gateway/auth"
)

// verifyOK verifies tok, failing the test if it does not verify.
func verifyOK(t *testing.T, j *auth.JWT, tok, what string) {
	t.Helper()
	if _, err := j.Verify(t.Context(), tok); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// wantStats compares j's hit and miss counts.
func wantStats(t *testing.T, j *auth.JWT, hits, misses uint64, what string) {
	t.Helper()
	if s := j.CacheStats(); s.Hits != hits || s.Misses != misses {
		t.Fatalf("%s: %d hits, %d misses; want %d, %d", what, s.Hits, s.Misses, hits, misses)
	}
}

// TestJWTCacheRevokedKey: a token of a key the JWKS (a real HTTP server)
// drops is served from the cache until the next refresh, and refused
// after it; tokens of the keys that stay keep verifying.
func TestJWTCacheRevokedKey(t *testing.T) {
	a, b := ecKey(), ecOther()
	ks := newKeyServer(jwksOf(t, jwkOf(t, "a", &a.PublicKey), jwkOf(t, "b", &b.PublicKey)))
	j := newJWT(t, auth.JWTOptions{JWKSURL: ks.serve(t), JWKSMinRefresh: time.Nanosecond})
	tokA := sign(t, jwt.SigningMethodES256, a, "a", claims(nil))
	tokB := sign(t, jwt.SigningMethodES256, b, "b", claims(nil))
	verifyOK(t, j, tokA, "token of a")
	verifyOK(t, j, tokB, "token of b")
	verifyOK(t, j, tokA, "token of a, again")
	wantStats(t, j, 1, 2, "a, b, a")

	// a is revoked: until the key set is fetched again, its token is
	// served as before (an uncached one would verify with the keys there
	// are too).
	ks.set(jwksOf(t, jwkOf(t, "b", &b.PublicKey)), http.StatusOK)
	verifyOK(t, j, tokA, "token of a before the refresh")
	wantStats(t, j, 2, 2, "before the refresh")

	// A token of an unknown kid makes the next refresh, which drops a.
	if _, err := j.Verify(t.Context(), sign(t, jwt.SigningMethodES256, b, "c", claims(nil))); reasonOf(err) != auth.ReasonUnknownKey {
		t.Fatalf("token of an unknown kid: %v, want %q", err, auth.ReasonUnknownKey)
	}
	requests := ks.requests.Load()
	if requests < 2 {
		t.Fatalf("%d JWKS requests, want the refresh", requests)
	}
	for range 2 {
		if _, err := j.Verify(t.Context(), tokA); reasonOf(err) != auth.ReasonUnknownKey {
			t.Fatalf("cached token of the revoked key after the refresh: %v, want %q", err, auth.ReasonUnknownKey)
		}
	}
	verifyOK(t, j, tokB, "token of b after the refresh") // verified again: the key set changed
	verifyOK(t, j, tokB, "token of b, cached again")
	if s := j.CacheStats(); s.Entries != 1 || s.Hits != 3 {
		t.Errorf("after the refresh: %+v, want 1 entry (b's) and its hit", s)
	}
}

// TestJWTCacheRefreshTiming: on a fake clock, a revoked key's cached
// token is served until the periodic refresh (JWKSRefresh) and refused
// right after it; a refresh that brings the same keys keeps the cache.
func TestJWTCacheRefreshTiming(t *testing.T) {
	a, b := ecKey(), ecOther()
	synctest.Test(t, func(t *testing.T) {
		ks := newKeyServer(jwksOf(t, jwkOf(t, "a", &a.PublicKey), jwkOf(t, "b", &b.PublicKey)))
		j, err := auth.NewJWT(auth.JWTOptions{JWKSURL: "https://id.test/jwks.json", HTTPClient: &http.Client{Transport: ks}, JWKSRefresh: time.Minute, JWKSMinRefresh: 3 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer j.Close()
		tokA := sign(t, jwt.SigningMethodES256, a, "a", claims(nil))
		tokB := sign(t, jwt.SigningMethodES256, b, "b", claims(nil))
		verifyOK(t, j, tokA, "token of a")
		verifyOK(t, j, tokB, "token of b")

		time.Sleep(time.Minute) // the first refresh brings the same keys
		synctest.Wait()
		if got := ks.requests.Load(); got != 2 {
			t.Fatalf("%d JWKS requests after a minute, want 2", got)
		}
		verifyOK(t, j, tokA, "token of a after a refresh of the same keys")
		verifyOK(t, j, tokB, "token of b after a refresh of the same keys")
		wantStats(t, j, 2, 2, "a refresh of the same keys")

		ks.set(jwksOf(t, jwkOf(t, "b", &b.PublicKey)), http.StatusOK)
		time.Sleep(time.Minute - time.Nanosecond)
		verifyOK(t, j, tokA, "revoked key's token before the refresh")
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if got := ks.requests.Load(); got != 3 {
			t.Fatalf("%d JWKS requests after two minutes, want 3", got)
		}
		if _, err := j.Verify(t.Context(), tokA); reasonOf(err) != auth.ReasonUnknownKey {
			t.Errorf("revoked key's cached token after the refresh: %v, want %q", err, auth.ReasonUnknownKey)
		}
		verifyOK(t, j, tokB, "token of b after the rotation")
	})
}

// TestJWTCacheExpiry: a cached token is refused at its exp (plus the
// leeway), though it is cached.
func TestJWTCacheExpiry(t *testing.T) {
	for _, leeway := range []time.Duration{0, 2 * time.Second} {
		t.Run(fmt.Sprint("leeway ", leeway), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				j := newJWT(t, auth.JWTOptions{Keys: []auth.Key{{Secret: hmacSecret()}}, Leeway: leeway})
				tok := sign(t, jwt.SigningMethodHS256, hmacSecret(), "", claims(map[string]any{"exp": time.Now().Add(10 * time.Second).Unix()}))
				verifyOK(t, j, tok, "fresh token")
				time.Sleep(10*time.Second + leeway - time.Nanosecond)
				verifyOK(t, j, tok, "token just before its exp")
				wantStats(t, j, 1, 1, "just before exp")
				time.Sleep(time.Nanosecond)
				if _, err := j.Verify(t.Context(), tok); reasonOf(err) != auth.ReasonExpired {
					t.Fatalf("cached token at its exp: %v, want %q", err, auth.ReasonExpired)
				}
				if s := j.CacheStats(); s.Entries != 0 {
					t.Errorf("expired token still cached: %+v", s)
				}
			})
		})
	}
}

// TestJWTCacheNotBefore: a token before its nbf (or iat) is refused and
// not cached; from then on it verifies, and is cached.
func TestJWTCacheNotBefore(t *testing.T) {
	for _, claim := range []string{"nbf", "iat"} {
		t.Run(claim, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				j := newJWT(t, auth.JWTOptions{Keys: []auth.Key{{Secret: hmacSecret()}}, Leeway: time.Second})
				tok := sign(t, jwt.SigningMethodHS256, hmacSecret(), "", claims(map[string]any{claim: time.Now().Add(5 * time.Second).Unix()}))
				time.Sleep(4*time.Second - time.Nanosecond)
				for range 2 {
					if _, err := j.Verify(t.Context(), tok); reasonOf(err) != auth.ReasonNotYetValid {
						t.Fatalf("token before its %s: %v, want %q", claim, err, auth.ReasonNotYetValid)
					}
				}
				if s := j.CacheStats(); s.Entries != 0 || s.Misses != 2 {
					t.Fatalf("after a token not yet valid: %+v, want no entry and 2 misses", s)
				}
				time.Sleep(time.Nanosecond)
				verifyOK(t, j, tok, "token at its "+claim+" less the leeway")
				verifyOK(t, j, tok, "token, cached")
				wantStats(t, j, 1, 3, "valid from "+claim)
			})
		})
	}
}

// TestJWTCacheFlood: 100,000 distinct invalid tokens (bad signatures, and
// well signed ones that have expired) cost one verification each and
// leave the valid tokens cached.
func TestJWTCacheFlood(t *testing.T) {
	const valid, bad = 10, 100_000
	j := newJWT(t, auth.JWTOptions{Keys: []auth.Key{{Secret: hmacSecret()}}, CacheEntries: 2 * valid})
	var good []string
	for i := range valid {
		tok := sign(t, jwt.SigningMethodHS256, hmacSecret(), "", claims(map[string]any{"jti": fmt.Sprint("good-", i)}))
		good = append(good, tok)
		verifyOK(t, j, tok, "valid token")
	}
	expired := time.Now().Add(-time.Minute).Unix()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var accepted int
	for w := range 4 {
		wg.Go(func() {
			for i := w; i < bad; i += 4 {
				var tok string
				if i%2 == 0 {
					// good[0] with a signature of its own: 32 bytes, i in the first.
					sig := make([]byte, 32)
					copy(sig, fmt.Sprint(i))
					tok = good[0][:strings.LastIndexByte(good[0], '.')+1] + base64.RawURLEncoding.EncodeToString(sig)
				} else {
					tok = sign(t, jwt.SigningMethodHS256, hmacSecret(), "", claims(map[string]any{"jti": fmt.Sprint("bad-", i), "exp": expired}))
				}
				if _, err := j.Verify(t.Context(), tok); err == nil {
					mu.Lock()
					accepted++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if accepted != 0 {
		t.Fatalf("%d invalid tokens accepted", accepted)
	}
	wantStats(t, j, 0, valid+bad, "the flood: one verification per token")
	for _, tok := range good {
		verifyOK(t, j, tok, "valid token after the flood")
	}
	wantStats(t, j, valid, valid+bad, "the valid tokens after the flood")
	if s := j.CacheStats(); s.Entries != valid {
		t.Errorf("%d entries, want the %d valid tokens", s.Entries, valid)
	}
}

// TestJWTCacheBounds: the cache holds at most CacheEntries tokens and
// CacheBytes bytes (an entry: twice the token's length plus 256), the
// least recently used going first; NoCache caches nothing.
func TestJWTCacheBounds(t *testing.T) {
	tokens := make([]string, 20)
	for i := range tokens {
		tokens[i] = sign(t, jwt.SigningMethodHS256, hmacSecret(), "", claims(map[string]any{"jti": fmt.Sprintf("%04d", i)}))
	}
	size := 2*len(tokens[0]) + 256
	for _, tt := range []struct {
		name string
		o    auth.JWTOptions
		keep int
	}{
		{"entries", auth.JWTOptions{CacheEntries: 5}, 5},
		{"bytes", auth.JWTOptions{CacheBytes: 3*size + size/2}, 3},
		{"bytes, exactly", auth.JWTOptions{CacheBytes: 4 * size}, 4},
		{"one entry, exactly", auth.JWTOptions{CacheBytes: size}, 1},
		{"an entry larger than the bound", auth.JWTOptions{CacheBytes: size - 1}, 0},
		{"no cache", auth.JWTOptions{NoCache: true}, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.o.Keys = []auth.Key{{Secret: hmacSecret()}}
			j := newJWT(t, tt.o)
			for _, tok := range tokens {
				verifyOK(t, j, tok, "token")
			}
			s := j.CacheStats()
			if s.Entries != tt.keep || s.Bytes != tt.keep*size {
				t.Fatalf("%+v, want %d entries of %d bytes", s, tt.keep, tt.keep*size)
			}
			// The latest keep tokens hit, the others were evicted.
			for i := len(tokens) - 1; i >= 0; i-- {
				verifyOK(t, j, tokens[i], "token again")
				if i == len(tokens)-tt.keep {
					wantStats(t, j, uint64(tt.keep), uint64(len(tokens)), "the tokens kept")
				}
			}
			if s := j.CacheStats(); tt.o.NoCache && s != (auth.CacheStats{}) {
				t.Errorf("NoCache counted %+v", s)
			} else if !tt.o.NoCache && (s.Entries != tt.keep || s.Bytes != tt.keep*size || s.Hits != uint64(tt.keep)) {
				t.Errorf("after the second pass: %+v, want %d entries of %d bytes and %d hits", s, tt.keep, tt.keep*size, tt.keep)
			}
		})
	}
}

// TestJWTCacheConcurrent verifies tokens from many goroutines while the
// cache evicts and the JWKS key set changes (run it with -race).
func TestJWTCacheConcurrent(t *testing.T) {
	a, b := ecKey(), ecOther()
	both := jwksOf(t, jwkOf(t, "a", &a.PublicKey), jwkOf(t, "b", &b.PublicKey))
	ks := newKeyServer(both)
	j := newJWT(t, auth.JWTOptions{JWKSURL: ks.serve(t), JWKSMinRefresh: time.Nanosecond, CacheEntries: 8})
	var tokens []string
	for i := range 16 {
		tokens = append(tokens, sign(t, jwt.SigningMethodES256, a, "a", claims(map[string]any{"jti": fmt.Sprint(i)})))
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Go(func() {
			for i := range 200 {
				if w == 0 && i%20 == 0 {
					// A refresh that changes the key set: an unknown kid asks for it.
					if i%40 == 0 {
						ks.set(jwksOf(t, jwkOf(t, "a", &a.PublicKey)), http.StatusOK)
					} else {
						ks.set(both, http.StatusOK)
					}
					_, _ = j.Verify(t.Context(), sign(t, jwt.SigningMethodES256, b, fmt.Sprint("x", i), claims(nil)))
					continue
				}
				if _, err := j.Verify(t.Context(), tokens[(w*7+i)%len(tokens)]); err != nil {
					errs <- err
					return
				}
				_ = j.CacheStats()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if s := j.CacheStats(); s.Entries > 8 || s.Hits+s.Misses < 7*200 {
		t.Errorf("%+v: more than 8 entries, or verifications not counted", s)
	}
}

// TestDelegateCacheStats: the delegate's answer cache counts its hits and
// misses; a refused token is a miss and no entry.
func TestDelegateCacheStats(t *testing.T) {
	svc := newAuthService(t, answerFor(time.Now().Add(time.Hour).Unix()))
	d := newDelegate(t, auth.DelegateOptions{Caller: svc.node})
	for _, tok := range []string{"good", "good", "bad"} {
		_, _ = d.Verify(t.Context(), tok)
	}
	if s := d.CacheStats(); s.Hits != 1 || s.Misses != 2 || s.Entries != 1 || s.Bytes == 0 {
		t.Errorf("%+v, want 1 hit, 2 misses, 1 entry", s)
	}
}

// TestJWTVerifyOnce: VerifyOnce serves a cached token from the cache but
// does not cache a token it verifies in full; it refuses what Verify
// refuses.
func TestJWTVerifyOnce(t *testing.T) {
	j := newJWT(t, auth.JWTOptions{Keys: []auth.Key{{Secret: hmacSecret()}}})
	once := sign(t, jwt.SigningMethodHS256, hmacSecret(), "", claims(map[string]any{"sub": "u1"}))
	kept := sign(t, jwt.SigningMethodHS256, hmacSecret(), "", claims(map[string]any{"sub": "u2"}))
	for range 2 {
		id, err := j.VerifyOnce(t.Context(), once)
		if err != nil || id.Subject != "u1" {
			t.Fatalf("VerifyOnce: %+v, %v", id, err)
		}
	}
	if s := j.CacheStats(); s.Entries != 0 || s.Misses != 2 || s.Hits != 0 {
		t.Fatalf("after VerifyOnce twice: %+v, want 2 misses, no entry", s)
	}
	verifyOK(t, j, kept, "Verify")
	if id, err := j.VerifyOnce(t.Context(), kept); err != nil || id.Subject != "u2" {
		t.Fatalf("VerifyOnce of a cached token: %+v, %v", id, err)
	}
	if s := j.CacheStats(); s.Entries != 1 || s.Hits != 1 {
		t.Fatalf("after Verify, then VerifyOnce of the same token: %+v, want 1 hit, 1 entry", s)
	}
	expired := sign(t, jwt.SigningMethodHS256, hmacSecret(), "", claims(map[string]any{"sub": "u3", "exp": time.Now().Add(-time.Hour).Unix()}))
	if _, err := j.VerifyOnce(t.Context(), expired); err == nil {
		t.Error("VerifyOnce took an expired token")
	}
	if _, err := j.VerifyOnce(t.Context(), ""); err == nil {
		t.Error("VerifyOnce took no token")
	}
}
