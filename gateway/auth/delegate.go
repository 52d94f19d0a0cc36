package auth

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/pattern"
)

// Caller calls a pattern in the mesh. [*runtime.Node] implements it.
type Caller interface {
	Act(ctx context.Context, pattern string, msg any, opts ...runtime.CallOption) (runtime.Result, error)
}

// DelegateOptions configures [NewDelegate]. Zero values mean the defaults;
// Caller and Pattern are required.
type DelegateOptions struct {
	// Caller makes the calls: the gateway's node.
	Caller Caller
	// Pattern is the auth pattern ("role:auth,cmd:verify").
	Pattern string
	// Timeout bounds one call of the auth pattern (default 500ms); a call
	// that takes longer fails closed (503).
	Timeout time.Duration
	// CacheEntries bounds the answers cached (default 10,000).
	CacheEntries int
	// CacheBytes bounds the size of the answers cached, as their JSON
	// (default 16 MiB).
	CacheBytes int
	// MaxCacheTTL, if set, bounds how long an answer is cached, so that a
	// revoked token stops working before it expires. Default: until the
	// answer's expires_at.
	MaxCacheTTL time.Duration
	// MaxTokenSize bounds the token, in bytes (default 16 KiB).
	MaxTokenSize int
	// MaxInFlight bounds the calls of the auth pattern in progress
	// (default 1,024): a token that needs one more fails closed (503),
	// so that a flood of distinct tokens cannot pile up calls.
	MaxInFlight int
}

// Delegate verifies tokens by calling an auth pattern in the mesh, as
// pathfinder's Auth/Auth microservice did. It sends {"token": "..."} and
// reads an answer
//
//	{"subject": "u_1", "scopes": ["a", "b"] or "a b", "expires_at": "2026-12-01T16:00:00Z" or 1796140800,
//	 "issuer": "...", "audience": ["..."], "claims": {...}}
//
// in which subject and expires_at are required. The answer is cached until
// expires_at (bounded in entries and bytes, keyed by the token's SHA-256,
// never the token), and concurrent verifications of one token share one
// call. A handler error with code unauthenticated, permission_denied or
// invalid_argument rejects the token (401); a timeout, any other code, or an
// answer that cannot be read fails closed (503).
type Delegate struct {
	caller  Caller
	pattern string
	timeout time.Duration
	maxTTL  time.Duration
	max     int
	maxCall int
	cache   *answerCache

	base   context.Context // canceled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	flights map[[sha256.Size]byte]*flight
	closed  bool
}

var _ Verifier = (*Delegate)(nil)

// flight is one call of the auth pattern that callers of the same token
// wait for.
type flight struct {
	done chan struct{} // closed when id and err are set
	id   *Identity
	err  error
}

const (
	defaultDelegateTimeout = 500 * time.Millisecond
	defaultCacheEntries    = 10_000
	defaultCacheBytes      = 16 << 20
	defaultMaxInFlight     = 1024
)

// NewDelegate returns a delegating verifier, or an error naming the option
// that is wrong. Call [Delegate.Close] to end its calls in progress.
func NewDelegate(o DelegateOptions) (*Delegate, error) {
	var err error
	switch {
	case o.Caller == nil:
		err = errors.New("Caller is nil")
	case o.Pattern == "":
		err = errors.New("Pattern is empty")
	case o.Timeout < 0:
		err = fmt.Errorf("Timeout %v is negative", o.Timeout)
	case o.CacheEntries < 0:
		err = fmt.Errorf("CacheEntries %d is negative", o.CacheEntries)
	case o.CacheBytes < 0:
		err = fmt.Errorf("CacheBytes %d is negative", o.CacheBytes)
	case o.MaxCacheTTL < 0:
		err = fmt.Errorf("MaxCacheTTL %v is negative", o.MaxCacheTTL)
	case o.MaxTokenSize < 0:
		err = fmt.Errorf("MaxTokenSize %d is negative", o.MaxTokenSize)
	case o.MaxInFlight < 0:
		err = fmt.Errorf("MaxInFlight %d is negative", o.MaxInFlight)
	default:
		if _, perr := pattern.Parse(o.Pattern); perr != nil {
			err = fmt.Errorf("Pattern %q: %w", o.Pattern, perr)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("wizard: gateway: auth: delegate: %w", err)
	}
	d := &Delegate{
		caller:  o.Caller,
		pattern: o.Pattern,
		timeout: cmp.Or(o.Timeout, defaultDelegateTimeout),
		maxTTL:  o.MaxCacheTTL,
		max:     cmp.Or(o.MaxTokenSize, defaultMaxTokenSize),
		maxCall: cmp.Or(o.MaxInFlight, defaultMaxInFlight),
		cache:   newAnswerCache(cmp.Or(o.CacheEntries, defaultCacheEntries), cmp.Or(o.CacheBytes, defaultCacheBytes)),
		flights: map[[sha256.Size]byte]*flight{},
	}
	d.base, d.cancel = context.WithCancel(context.Background())
	return d, nil
}

// Verify returns the identity the auth pattern gives token, from the cache
// if an earlier answer for it has not expired. Waiting for the call ends
// with ctx (503); the call itself goes on for the other callers and the
// cache, bounded by the delegate's Timeout.
func (d *Delegate) Verify(ctx context.Context, token string) (*Identity, error) {
	if token == "" {
		return nil, ErrMissingToken
	}
	if len(token) > d.max {
		return nil, newError(ReasonMalformed, "token too large", nil)
	}
	key := tokenKey(token)
	if id, ok := d.cache.get(key, time.Now(), nil); ok {
		return id, nil
	}
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil, newError(ReasonUnavailable, "", errors.New("delegate is closed"))
	}
	f := d.flights[key]
	if f == nil {
		if len(d.flights) >= d.maxCall {
			d.mu.Unlock()
			return nil, newError(ReasonUnavailable, "", fmt.Errorf("%d calls of the auth pattern in progress", d.maxCall))
		}
		f = &flight{done: make(chan struct{})}
		d.flights[key] = f
		d.wg.Add(1)
		go d.call(context.WithoutCancel(ctx), key, token, f)
	}
	d.mu.Unlock()
	select {
	case <-f.done:
		return f.id, f.err
	case <-ctx.Done():
		return nil, newError(ReasonUnavailable, "", ctx.Err())
	}
}

// call asks the auth pattern about token for the callers waiting on f,
// and caches a good answer.
func (d *Delegate) call(ctx context.Context, key [sha256.Size]byte, token string, f *flight) {
	defer d.wg.Done()
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	stop := context.AfterFunc(d.base, cancel)
	id, size, err := d.ask(ctx, token)
	stop()
	cancel()
	if err == nil {
		until := id.ExpiresAt
		if d.maxTTL > 0 {
			until = minTime(until, time.Now().Add(d.maxTTL))
		}
		d.cache.put(cached{key: key, id: id, until: until, size: size})
	}
	d.mu.Lock()
	delete(d.flights, key)
	d.mu.Unlock()
	f.id, f.err = id, err
	close(f.done)
}

// tokenKey is the cache key of token: its SHA-256. The hash reads the
// string's bytes in place (it never writes them), so a cache hit
// allocates nothing.
func tokenKey(token string) [sha256.Size]byte {
	return sha256.Sum256(unsafe.Slice(unsafe.StringData(token), len(token)))
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// ask calls the auth pattern and reads its answer: the identity and the
// answer's size in bytes.
func (d *Delegate) ask(ctx context.Context, token string) (*Identity, int, error) {
	res, err := d.caller.Act(ctx, d.pattern, map[string]any{"token": token}, runtime.Timeout(d.timeout))
	if err != nil {
		return nil, 0, d.callError(ctx, token, err)
	}
	b, err := json.Marshal(res.Value())
	if err != nil {
		return nil, 0, newError(ReasonUnavailable, "", fmt.Errorf("auth pattern %s: answer: %w", d.pattern, err))
	}
	id, err := readAnswer(b)
	if err != nil {
		return nil, 0, newError(ReasonUnavailable, "", fmt.Errorf("auth pattern %s: answer: %w", d.pattern, err))
	}
	if !time.Now().Before(id.ExpiresAt) {
		return nil, 0, newError(ReasonExpired, "", nil)
	}
	return id, len(b), nil
}

// callError maps the auth pattern's error: a refusal is 401, anything else
// 503. The handler's message goes into the cause (for logs) with the token
// cut out.
func (d *Delegate) callError(ctx context.Context, token string, err error) *Error {
	code := runtime.CodeOf(err)
	cause := fmt.Errorf("auth pattern %s: %s: %s", d.pattern, code, strings.ReplaceAll(err.Error(), token, "<token>"))
	if ctx.Err() != nil {
		return newError(ReasonUnavailable, "authentication timed out", cause)
	}
	switch code {
	case runtime.CodeUnauthenticated, runtime.CodePermissionDenied, runtime.CodeInvalidArgument:
		return newError(ReasonRejected, "", cause)
	}
	return newError(ReasonUnavailable, "", cause)
}

// answer is the auth pattern's answer.
type answer struct {
	Subject   string         `json:"subject"`
	Scopes    any            `json:"scopes"`
	ExpiresAt any            `json:"expires_at"`
	Issuer    string         `json:"issuer"`
	Audience  any            `json:"audience"`
	Claims    map[string]any `json:"claims"`
}

// readAnswer decodes an answer (JSON) into an identity.
func readAnswer(b []byte) (*Identity, error) {
	var a answer
	if err := json.Unmarshal(b, &a); err != nil {
		return nil, err
	}
	if a.Subject == "" {
		return nil, errors.New("no subject")
	}
	exp, err := timeOf(a.ExpiresAt)
	if err != nil {
		return nil, fmt.Errorf("expires_at: %w", err)
	}
	return &Identity{
		Subject:   a.Subject,
		Issuer:    a.Issuer,
		Audience:  stringsOf(a.Audience),
		Scopes:    stringsOf(a.Scopes),
		ExpiresAt: exp,
		Claims:    a.Claims,
	}, nil
}

// timeOf reads an RFC 3339 time or unix seconds (a number or a string of
// one).
func timeOf(v any) (time.Time, error) {
	var secs float64
	switch v := v.(type) {
	case nil:
		return time.Time{}, errors.New("missing")
	case float64:
		secs = v
	case string:
		if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
			return t, nil
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return time.Time{}, fmt.Errorf("%q is neither RFC 3339 nor unix seconds", v)
		}
		secs = f
	default:
		return time.Time{}, fmt.Errorf("a %T, not a time", v)
	}
	if secs <= 0 || secs > 1<<40 {
		return time.Time{}, fmt.Errorf("%v is out of range", secs)
	}
	whole := int64(secs)
	return time.Unix(whole, int64((secs-float64(whole))*1e9)), nil
}

// stringsOf reads a list of strings given as a JSON array or a
// space-separated string.
func stringsOf(v any) []string {
	switch v := v.(type) {
	case string:
		return strings.Fields(v)
	case []any:
		out := make([]string, 0, len(v))
		for _, e := range v {
			if s, ok := e.(string); ok && s != "" {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// CacheStats returns the counters of d's answer cache.
func (d *Delegate) CacheStats() CacheStats { return d.cache.stats() }

// Close ends the calls in progress (their callers get 503) and waits for
// them; later verifications fail with 503. It is idempotent.
func (d *Delegate) Close() error {
	d.mu.Lock()
	d.closed = true
	d.cancel()
	d.mu.Unlock()
	d.wg.Wait()
	return nil
}
