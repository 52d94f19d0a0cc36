// Package auth verifies the bearer tokens the gateway receives: JSON Web
// Tokens with keys of its own ([NewJWT]), or through an auth pattern in the
// mesh ([NewDelegate], pathfinder's Auth/Auth microservice). Both are a
// [Verifier], which returns the caller's [Identity] from verified claims
// only; [RequireScopes] checks a route's scopes against it.
//
// The package serves no HTTP: the gateway's server reads the token
// ([BearerToken] for an Authorization header, or a WebSocket auth frame),
// calls Verify, and maps the error to its response.
//
// # JWT
//
// A token verifies when its "alg" is on the allow-list ("none" never is),
// a key of that algorithm's kind and the token's "kid" verifies its
// signature, "exp" is present and not passed, "nbf" and "iat" (if present)
// are not in the future, all within the leeway, and "iss" and "aud" match
// when configured. Keys are static (PEM public keys: RSA, ECDSA, Ed25519;
// HMAC secrets) or fetched from a JWKS URL, or both. A key verifies only the
// algorithms of its kind: an HMAC secret never verifies an RS256 token, and
// an RSA public key is never taken for an HMAC secret. Scopes are read from
// the "scope" claim (space-separated) and "scp" (an array or a
// space-separated string).
//
// A JWKS is fetched by [NewJWT] (a failure there is its error: the gateway
// does not start without keys), then every [JWTOptions.JWKSRefresh] in the
// background. A token whose kid no key has triggers a refresh and waits for
// it, bounded by its context: at most one fetch runs at a time and at most
// one starts per [JWTOptions.JWKSMinRefresh]. A token arriving when none
// may start waits for the next one that may, unless the last fetch was
// already asked for its kid and did not bring it: then it fails at once.
// So a key the JWKS has just gained is found on the next fetch allowed,
// even right after a token of an unknown kid. Tokens of known kids never
// wait: they read the current keys without a lock. A failed refresh keeps
// the keys there are.
//
// A token must have a sub claim unless [JWTOptions.AllowNoSubject] says
// otherwise: an identity without a subject cannot be told from another.
//
// # Cached tokens
//
// A verified token is cached, keyed by its SHA-256 (never the token
// itself), until its exp plus the leeway, bounded in entries and bytes
// ([JWTOptions.CacheEntries], [JWTOptions.CacheBytes]; the least recently
// used go first). A hit repeats the checks that time or a JWKS refresh can
// change: exp, nbf and iat against the clock, and that the key set which
// verified the token is still the current one. A refresh that changes the
// keys makes a new key set, on which every cached token is verified again
// in full; one that brings the same keys keeps the cache. The issuer,
// audience and allow-list are fixed for a JWT's life (a reload builds a
// new verifier, with an empty cache).
//
// So a revoked key's tokens are refused from the JWKS refresh that no
// longer brings the key: at most [JWTOptions.JWKSRefresh] (plus the
// fetch's own time) after the key leaves the JWKS, sooner when a token of
// an unknown kid asks for a refresh. That is the bound without the cache
// too, as a token is verified with the keys of the last fetch; a refresh
// that fails keeps the keys there are, and so their tokens, until one
// succeeds.
//
// Only tokens that verify are cached: a refused token costs one
// verification and takes no entry, so a flood of distinct invalid tokens
// cannot evict the valid ones. [JWT.VerifyOnce] is for a caller that
// keeps the identity itself, as the gateway's WebSocket connections do:
// it reads the cache but adds nothing to it, so that the cache holds the
// tokens that come again. [JWT.CacheStats] counts hits and misses;
// [JWTOptions.NoCache] verifies every call in full.
//
// # Delegation
//
// [Delegate] calls its pattern with {"token": "..."} and caches the answer
// until its expires_at, bounded in entries and bytes and keyed by the
// token's SHA-256. Concurrent verifications of one token share one call;
// the calls in progress are bounded ([DelegateOptions.MaxInFlight]), and a
// caller that stops waiting leaves its call to the others and the cache.
//
// # Errors
//
// Every failure is an [*Error] with a [Reason], a short public message
// that never holds the token ([Error.Public]), an HTTP status
// ([Error.Status]), the matching wizard code ([Error.Code]) and the value of
// the WWW-Authenticate header ([Error.WWWAuthenticate]):
//
//	401 unauthenticated     missing, malformed, unsigned, wrong algorithm, unknown kid,
//	                        bad signature, expired, not yet valid, wrong iss or aud,
//	                        no exp; the auth pattern refused the token
//	403 permission_denied   a required scope is missing
//	503 unavailable         the auth pattern timed out, is unreachable or answered
//	                        what cannot be read; a JWKS refresh the token waited
//	                        for did not end in time (fail closed)
//
// Sentinels ([ErrExpired], ...) match any error of their reason with
// errors.Is; [ErrorOf] classifies any error, failing closed.
package auth
