package auth

import (
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// JWTOptions configures [NewJWT]. Zero values mean the defaults; at least
// one of Keys and JWKSURL is required.
type JWTOptions struct {
	// Keys are static verification keys (PEM public keys, HMAC secrets).
	Keys []Key
	// JWKSURL is a JSON Web Key Set to fetch keys from: https, or http for a
	// loopback host only. It is fetched by NewJWT (a failure is NewJWT's
	// error: the gateway does not start without its keys), then every
	// JWKSRefresh, and on a token whose kid no key has (at most one fetch at
	// a time, at most one per JWKSMinRefresh). Keys of kty RSA, EC and OKP
	// (Ed25519) with use "sig" or no use are taken; others are skipped.
	JWKSURL string
	// JWKSRefresh is the interval of the background refresh (default 5m):
	// a key dropped from the JWKS verifies tokens, cached or not, until
	// the next refresh, at most this long.
	JWKSRefresh time.Duration
	// JWKSMinRefresh is the least time between two fetches that unknown
	// kids trigger (default 5s); a failed refresh is retried after it,
	// doubling up to JWKSRefresh.
	JWKSMinRefresh time.Duration
	// JWKSTimeout bounds one fetch (default 10s).
	JWKSTimeout time.Duration
	// HTTPClient fetches the JWKS (default: a client of its own, which
	// follows redirects only to https URLs, or http ones on loopback).
	HTTPClient *http.Client
	// Algorithms is the allow-list of "alg" values (HS256/384/512,
	// RS256/384/512, PS256/384/512, ES256/384/512, EdDSA). Default: the
	// algorithms the static keys imply, plus, with a JWKSURL, every
	// asymmetric one (each key still verifies only the algorithms of its
	// kind, and a JWK's own "alg" if it has one). "none" is always refused.
	Algorithms []string
	// Issuer, if set, must equal the token's iss.
	Issuer string
	// Audience, if set, must hold one of the token's aud values.
	Audience []string
	// Leeway is the clock skew allowed on exp, nbf and iat (default 0).
	Leeway time.Duration
	// AllowNoSubject accepts a token without a sub claim (an identity
	// with an empty Subject, which per-subject limits and WebSocket
	// connections cannot tell apart). By default such a token is refused
	// (401, [ReasonClaims]).
	AllowNoSubject bool
	// MaxTokenSize bounds the token, in bytes (default 16 KiB).
	MaxTokenSize int
	// CacheEntries bounds the verified tokens cached (default 10,000).
	CacheEntries int
	// CacheBytes bounds the size of the verified tokens cached, estimated
	// as twice the token's length plus 256 bytes an entry (default 16 MiB).
	CacheBytes int
	// NoCache verifies every token in full on every call, signature
	// included, instead of caching verified tokens.
	NoCache bool
	// Logger receives a Warn for a failed JWKS refresh (default
	// slog.Default()).
	Logger *slog.Logger
}

// JWT verifies JSON Web Tokens with golang-jwt: the signature with a key
// of the token's algorithm (from the allow-list) and kid, a required exp,
// nbf and iat if present, and the issuer and audience when configured.
// A verified token is cached by its SHA-256 until its exp; a cached token
// is served only while exp, nbf and iat still hold and the key set that
// verified it is still the current one (see the package documentation).
type JWT struct {
	parser  *jwt.Parser
	allowed []string
	static  []verifyKey
	keys    atomic.Pointer[keyset]
	jwks    *jwks        // nil without a JWKSURL
	cache   *answerCache // nil with NoCache
	now     func() time.Time
	max     int
	opts    JWTOptions
}

var _ Verifier = (*JWT)(nil)

const defaultMaxTokenSize = 16 << 10

// NewJWT returns a JWT verifier, or an error naming the option that is
// wrong. With a JWKSURL it fetches the key set before it returns; call
// [JWT.Close] to stop its refresh.
func NewJWT(o JWTOptions) (*JWT, error) {
	if err := o.validate(); err != nil {
		return nil, fmt.Errorf("wizard: gateway: auth: %w", err)
	}
	j := &JWT{opts: o, max: cmp.Or(o.MaxTokenSize, defaultMaxTokenSize), now: time.Now}
	if !o.NoCache {
		j.cache = newAnswerCache(cmp.Or(o.CacheEntries, defaultCacheEntries), cmp.Or(o.CacheBytes, defaultCacheBytes))
	}
	for i, k := range o.Keys {
		vk, err := k.load()
		if err != nil {
			return nil, fmt.Errorf("wizard: gateway: auth: key %d%s: %w", i+1, kidNote(k.ID), err)
		}
		j.static = append(j.static, vk)
	}
	allowed, err := allowList(o.Algorithms, j.static, o.JWKSURL != "")
	if err != nil {
		return nil, fmt.Errorf("wizard: gateway: auth: %w", err)
	}
	j.allowed = allowed
	popts := []jwt.ParserOption{
		jwt.WithValidMethods(allowed),
		jwt.WithExpirationRequired(),
		jwt.WithLeeway(o.Leeway),
		jwt.WithIssuedAt(),
		jwt.WithStrictDecoding(), // one encoding per signature: no malleable trailing bits
		jwt.WithTimeFunc(j.clock),
	}
	if o.Issuer != "" {
		popts = append(popts, jwt.WithIssuer(o.Issuer))
	}
	if len(o.Audience) > 0 {
		popts = append(popts, jwt.WithAudience(o.Audience...))
	}
	j.parser = jwt.NewParser(popts...)
	j.keys.Store(newKeyset(j.static, allowed))
	if o.JWKSURL != "" {
		j.jwks = newJWKS(&o, j.setJWKS)
		if err := j.jwks.start(); err != nil {
			return nil, fmt.Errorf("wizard: gateway: auth: jwks_url %s: %w", o.JWKSURL, err)
		}
	}
	return j, nil
}

func kidNote(kid string) string {
	if kid == "" {
		return ""
	}
	return fmt.Sprintf(" (kid %q)", kid)
}

func (o *JWTOptions) validate() error {
	switch {
	case len(o.Keys) == 0 && o.JWKSURL == "":
		return errors.New("no keys: set Keys or JWKSURL")
	case o.JWKSRefresh < 0:
		return fmt.Errorf("JWKSRefresh %v is negative", o.JWKSRefresh)
	case o.JWKSMinRefresh < 0:
		return fmt.Errorf("JWKSMinRefresh %v is negative", o.JWKSMinRefresh)
	case o.JWKSTimeout < 0:
		return fmt.Errorf("JWKSTimeout %v is negative", o.JWKSTimeout)
	case o.Leeway < 0:
		return fmt.Errorf("Leeway %v is negative", o.Leeway)
	case o.MaxTokenSize < 0:
		return fmt.Errorf("MaxTokenSize %d is negative", o.MaxTokenSize)
	case o.CacheEntries < 0:
		return fmt.Errorf("CacheEntries %d is negative", o.CacheEntries)
	case o.CacheBytes < 0:
		return fmt.Errorf("CacheBytes %d is negative", o.CacheBytes)
	}
	for i, a := range o.Audience {
		if a == "" {
			return fmt.Errorf("Audience %d is empty", i+1)
		}
	}
	if o.JWKSURL != "" {
		if err := checkJWKSURL(o.JWKSURL); err != nil {
			return err
		}
	}
	return nil
}

// allowList checks the configured algorithms against the keys, or derives
// them from the keys.
func allowList(algs []string, keys []verifyKey, jwks bool) ([]string, error) {
	kinds := map[keyKind]bool{}
	for _, k := range keys {
		kinds[k.kind] = true
	}
	if len(algs) == 0 {
		for _, a := range algOrder {
			if kinds[algKinds[a]] || (jwks && algKinds[a] != kindHMAC) {
				algs = append(algs, a)
			}
		}
		return algs, nil
	}
	for i, a := range algs {
		kind, ok := algKinds[a]
		switch {
		case strings.EqualFold(a, "none"):
			return nil, fmt.Errorf("algorithm %d: %q is never allowed", i+1, a)
		case !ok:
			return nil, fmt.Errorf("algorithm %d: %q is not one of %s", i+1, a, strings.Join(algOrder, ", "))
		case slices.Contains(algs[:i], a):
			return nil, fmt.Errorf("algorithm %d: %s is listed twice", i+1, a)
		case kind == kindHMAC && !kinds[kindHMAC]:
			return nil, fmt.Errorf("algorithm %d: %s needs an HMAC secret in Keys (a JWKS gives none)", i+1, a)
		case !kinds[kind] && !jwks:
			return nil, fmt.Errorf("algorithm %d: %s needs a %s, and no key is one", i+1, a, kind)
		}
	}
	for i, k := range keys {
		if !slices.ContainsFunc(algs, k.allows) {
			return nil, fmt.Errorf("key %d%s: a %s, but Algorithms allow none of %s", i+1, kidNote(k.kid), k.kind, strings.Join(k.kind.algs(), ", "))
		}
	}
	return slices.Clone(algs), nil
}

// setJWKS installs the keys of a fetched JWKS beside the static ones. A
// fetch that brings the keys there are keeps the current key set, and so
// the cached tokens; any other change makes a new one, on which every
// cached token is verified again.
func (j *JWT) setJWKS(keys []verifyKey) {
	all := append(slices.Clip(j.static), keys...)
	if cur := j.keys.Load(); cur != nil && sameKeys(cur.keys, all) {
		return
	}
	j.keys.Store(newKeyset(all, j.allowed))
}

// clock is the time tokens are checked at.
func (j *JWT) clock() time.Time { return j.now() }

// CacheStats returns the counters of j's cache of verified tokens (zero
// with NoCache).
func (j *JWT) CacheStats() CacheStats { return j.cache.stats() }

// Algorithms returns the allow-list in use.
func (j *JWT) Algorithms() []string { return slices.Clone(j.allowed) }

// Close stops the JWKS refresh and waits for a fetch in progress to end.
// It is idempotent; Verify keeps working with the keys it has.
func (j *JWT) Close() error {
	if j.jwks != nil {
		j.jwks.close()
	}
	return nil
}

// errNeedKeys marks a token whose kid no key has: a JWKS refresh may bring
// its key.
var errNeedKeys = errors.New("no key has the token's kid")

// Verify verifies token and returns its identity, or an [*Error]: 401 for
// a malformed, unsigned, badly signed, expired or not yet valid token, the
// wrong issuer or audience, or no exp; 503 when a JWKS refresh that the
// token's unknown kid waits for does not end before ctx.
func (j *JWT) Verify(ctx context.Context, token string) (*Identity, error) {
	return j.verify(ctx, token, true)
}

// VerifyOnce is [JWT.Verify] for a token whose identity the caller keeps
// for as long as it needs it, as a WebSocket connection keeps its own: a
// token in the cache is served from it, but a token verified in full is
// not added to it. Such a token is seldom verified again, and a cached
// identity holds the token's claims map: filled by many connections'
// tokens, the cache would hold memory that no request reads.
func (j *JWT) VerifyOnce(ctx context.Context, token string) (*Identity, error) {
	return j.verify(ctx, token, false)
}

// verify verifies token, through the cache, adding a token verified in
// full to it when fill says so.
func (j *JWT) verify(ctx context.Context, token string, fill bool) (*Identity, error) {
	if token == "" {
		return nil, ErrMissingToken
	}
	if len(token) > j.max {
		return nil, newError(ReasonMalformed, "token too large", nil)
	}
	ks := j.keys.Load()
	var key [sha256.Size]byte
	if j.cache != nil {
		key = tokenKey(token)
		if id, ok := j.cache.get(key, j.now(), ks); ok {
			return id, nil
		}
	}
	id, from, err := j.parse(ks, token)
	if err != nil && j.jwks != nil && errors.Is(err, errNeedKeys) {
		kid := kidOf(token)
		if err := j.jwks.await(ctx, kid); err != nil {
			return nil, err
		}
		ks = j.keys.Load()
		id, from, err = j.parse(ks, token)
		if errors.Is(err, errNeedKeys) {
			j.jwks.missed(kid)
		}
	}
	if err != nil {
		return nil, err
	}
	if fill && j.cache != nil {
		j.cache.put(cached{key: key, id: id, from: from, until: id.ExpiresAt.Add(j.opts.Leeway), keys: ks, size: 2 * len(token)})
	}
	return id, nil
}

// kidOf is the kid of a token's header, unverified ("" for none): what
// the JWKS was looked up for.
func kidOf(token string) string {
	t, _, err := jwt.NewParser().ParseUnverified(token, jwt.MapClaims{})
	if err != nil {
		return ""
	}
	kid, _ := t.Header["kid"].(string)
	return kid
}

// parse verifies token against the keys of ks: its identity, and the
// time from which it is valid (its nbf or iat, the later, less the
// leeway).
func (j *JWT) parse(ks *keyset, token string) (*Identity, time.Time, error) {
	claims := jwt.MapClaims{}
	t, err := j.parser.ParseWithClaims(token, claims, func(t *jwt.Token) (any, error) { return keyOf(ks, t) })
	if err != nil {
		return nil, time.Time{}, j.classify(t, claims, err)
	}
	id, err := identityOf(claims, j.opts.AllowNoSubject)
	if err != nil {
		return nil, time.Time{}, err
	}
	return id, validFrom(claims, j.opts.Leeway), nil
}

// validFrom is the time from which verified claims c hold: the later of
// nbf and iat less the leeway, as golang-jwt checks them (zero for
// neither).
func validFrom(c jwt.MapClaims, leeway time.Duration) time.Time {
	var from time.Time
	nbf, _ := c.GetNotBefore()
	iat, _ := c.GetIssuedAt()
	for _, d := range [...]*jwt.NumericDate{nbf, iat} {
		if d != nil && d.After(from) {
			from = d.Time
		}
	}
	if from.IsZero() {
		return from
	}
	return from.Add(-leeway)
}

// keyOf returns the keys of ks for t's algorithm and kid.
func keyOf(ks *keyset, t *jwt.Token) (any, error) {
	if _, ok := t.Header["crit"]; ok {
		// RFC 7515 §4.1.11: extensions the verifier does not understand
		// make the token invalid, and the gateway understands none.
		return nil, newError(ReasonMalformed, "token has critical header parameters", nil)
	}
	kid, ok := t.Header["kid"].(string)
	if !ok && t.Header["kid"] != nil {
		return nil, newError(ReasonMalformed, "token kid is not a string", nil)
	}
	k, res := ks.lookup(t.Method.Alg(), kid)
	switch res {
	case unknownKid:
		return nil, newError(ReasonUnknownKey, "", errNeedKeys)
	case wrongAlg:
		return nil, newError(ReasonAlgorithm, "token algorithm does not match its key", nil)
	case noKey:
		return nil, newError(ReasonUnknownKey, "no key for the token's algorithm", nil)
	}
	return k, nil
}

// classify turns golang-jwt's error into an [*Error].
func (j *JWT) classify(t *jwt.Token, claims jwt.MapClaims, err error) *Error {
	var e *Error
	switch {
	case errors.As(err, &e):
		return e
	case t != nil && t.Method != nil && !slices.Contains(j.allowed, t.Method.Alg()):
		return newError(ReasonAlgorithm, "", err)
	case errors.Is(err, jwt.ErrTokenMalformed):
		return newError(ReasonMalformed, "", err)
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		return newError(ReasonSignature, "", err)
	case errors.Is(err, jwt.ErrTokenUnverifiable):
		// An alg golang-jwt does not know ("signing method ... is unavailable").
		return newError(ReasonAlgorithm, "", err)
	case errors.Is(err, jwt.ErrTokenExpired):
		return newError(ReasonExpired, "", err)
	case errors.Is(err, jwt.ErrTokenNotValidYet), errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return newError(ReasonNotYetValid, "", err)
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		return newError(ReasonIssuer, "", err)
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		return newError(ReasonAudience, "", err)
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		if _, ok := claims["exp"]; !ok {
			return newError(ReasonClaims, "token has no exp claim", err)
		}
		if _, ok := claims["iss"]; !ok && j.opts.Issuer != "" {
			return newError(ReasonIssuer, "", err)
		}
		return newError(ReasonAudience, "", err)
	}
	return newError(ReasonClaims, "", err)
}

// identityOf reads an identity from verified claims; a sub, iss or aud of
// the wrong type, or no sub unless allowed, is an error of [ReasonClaims].
func identityOf(c jwt.MapClaims, allowNoSubject bool) (*Identity, error) {
	id := &Identity{Claims: c, Scopes: scopesOf(c)}
	var errs [4]error
	id.Subject, errs[0] = c.GetSubject()
	id.Issuer, errs[1] = c.GetIssuer()
	id.Audience, errs[2] = c.GetAudience()
	exp, err := c.GetExpirationTime()
	errs[3] = err
	if err := errors.Join(errs[:]...); err != nil || exp == nil {
		return nil, newError(ReasonClaims, "", err)
	}
	if id.Subject == "" && !allowNoSubject {
		return nil, newError(ReasonClaims, "token has no sub", nil)
	}
	id.ExpiresAt = exp.Time
	return id, nil
}
