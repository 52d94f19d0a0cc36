package auth

import (
	"cmp"
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"
)

const (
	defaultJWKSRefresh    = 5 * time.Minute
	defaultJWKSMinRefresh = 5 * time.Second
	defaultJWKSTimeout    = 10 * time.Second
	maxJWKSBytes          = 1 << 20
	maxJWKSKeys           = 64
)

// checkJWKSURL accepts https URLs, and http ones for loopback hosts.
func checkJWKSURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("JWKSURL: %w", err)
	}
	switch {
	case u.Host == "":
		return fmt.Errorf("JWKSURL %q has no host", s)
	case u.Scheme == "https":
		return nil
	case u.Scheme == "http" && isLoopback(u.Hostname()):
		return nil
	case u.Scheme == "http":
		return fmt.Errorf("JWKSURL %q: http is allowed for loopback hosts only; use https", s)
	}
	return fmt.Errorf("JWKSURL %q: scheme %q is not https", s, u.Scheme)
}

// checkRedirect holds redirects to the rule of the JWKS URL (https, or
// http on loopback), so that a redirect cannot downgrade the fetch.
func checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= 5 {
		return errors.New("more than 5 redirects")
	}
	return checkJWKSURL(req.URL.String())
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// jwks fetches a JSON Web Key Set: once at start, then every interval in
// a goroutine of its own, and on demand ([jwks.await]) at most once at a
// time and at most once per minInterval.
type jwks struct {
	url                   string
	client                *http.Client
	timeout               time.Duration
	interval, minInterval time.Duration
	install               func([]verifyKey)
	log                   *slog.Logger

	ctx    context.Context // canceled by close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	inflight chan struct{}       // closed when the fetch in progress ends; nil when none
	last     time.Time           // start of the last fetch
	failures int                 // consecutive failed fetches
	miss     map[string]struct{} // kids tokens waited for that the last fetch did not bring
}

// maxMissed bounds the kids remembered as missed; past it every unknown
// kid is treated as missed until the next fetch.
const maxMissed = 1024

func newJWKS(o *JWTOptions, install func([]verifyKey)) *jwks {
	s := &jwks{
		url:         o.JWKSURL,
		client:      o.HTTPClient,
		timeout:     cmp.Or(o.JWKSTimeout, defaultJWKSTimeout),
		interval:    cmp.Or(o.JWKSRefresh, defaultJWKSRefresh),
		minInterval: cmp.Or(o.JWKSMinRefresh, defaultJWKSMinRefresh),
		install:     install,
		log:         cmp.Or(o.Logger, slog.Default()),
	}
	if s.client == nil {
		s.client = &http.Client{CheckRedirect: checkRedirect}
	}
	s.minInterval = min(s.minInterval, s.interval)
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s
}

// start fetches the key set once, then starts the background refresh.
func (s *jwks) start() error {
	s.last = time.Now()
	if err := s.fetch(); err != nil {
		s.cancel()
		return err
	}
	s.wg.Add(1)
	go s.run()
	return nil
}

func (s *jwks) close() {
	s.mu.Lock() // refresh checks ctx and adds to wg under mu
	s.cancel()
	s.mu.Unlock()
	s.wg.Wait()
}

// run refreshes the key set every interval; after a failure, sooner.
func (s *jwks) run() {
	defer s.wg.Done()
	t := time.NewTimer(s.interval)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		if done := s.refresh(); done != nil {
			select {
			case <-s.ctx.Done():
				return
			case <-done:
			}
		}
		t.Reset(s.next())
	}
}

// next is the wait before the next scheduled refresh: the interval, or
// after failures minInterval doubled per failure, up to the interval.
func (s *jwks) next() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failures == 0 {
		return s.interval
	}
	d := s.minInterval
	for i := 1; i < s.failures && d < s.interval; i++ {
		d *= 2
	}
	return min(d, s.interval)
}

// refresh starts a fetch unless one is in progress (it returns that one's
// channel) or the last began less than minInterval ago (it returns nil).
// The channel is closed when the fetch ends.
func (s *jwks) refresh() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inflight != nil {
		return s.inflight
	}
	if s.ctx.Err() != nil || time.Since(s.last) < s.minInterval {
		return nil
	}
	done := make(chan struct{})
	s.inflight, s.last = done, time.Now()
	clear(s.miss)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		err := s.fetch()
		s.mu.Lock()
		if err != nil {
			s.failures++
		} else {
			s.failures = 0
		}
		s.inflight = nil
		s.mu.Unlock()
		close(done)
		if err != nil && s.ctx.Err() == nil {
			s.log.Warn("wizard: gateway: auth: JWKS refresh failed; keeping the keys there are", "url", s.url, "err", err)
		}
	}()
	return done
}

// await waits for a refresh on behalf of a token with an unknown kid: nil
// when a refresh ended (the caller looks again), [ErrUnknownKey] when the
// last fetch already did not bring kid and the next may not start yet,
// [ReasonUnavailable] when ctx ends first. A kid the last fetch was not
// asked for waits for the next fetch the minimum interval allows: a key
// the JWKS has just gained is found then, not refused until a later
// token, and fetches stay at most one per interval whatever the kids.
func (s *jwks) await(ctx context.Context, kid string) error {
	var seen time.Time // the start of the last fetch when the token began to wait
	for first := true; ; first = false {
		done, wait, last := s.slot(kid)
		if first {
			seen = last
		} else if done == nil && last.After(seen) {
			return nil // a fetch began and ended while the token waited: look again
		}
		if done != nil {
			select {
			case <-done:
				return nil
			case <-ctx.Done():
				return newError(ReasonUnavailable, "signing keys are being refreshed", ctx.Err())
			}
		}
		if wait <= 0 {
			return ErrUnknownKey
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return newError(ReasonUnavailable, "signing keys are being refreshed", ctx.Err())
		case <-s.ctx.Done():
			t.Stop()
			return ErrUnknownKey
		}
	}
}

// slot starts a fetch for kid, or returns the one in progress; else how
// long until one may start (0: kid was missed by the last fetch, or the
// key set is closed). last is the start of the last fetch.
func (s *jwks) slot(kid string) (done <-chan struct{}, wait time.Duration, last time.Time) {
	done = s.refresh()
	s.mu.Lock()
	defer s.mu.Unlock()
	last = s.last
	if done != nil {
		return done, 0, last
	}
	if s.ctx.Err() != nil || len(s.miss) >= maxMissed {
		return nil, 0, last
	}
	if _, ok := s.miss[kid]; ok {
		return nil, 0, last
	}
	return nil, max(time.Until(s.last.Add(s.minInterval)), time.Nanosecond), last
}

// missed records that the last fetch did not bring kid.
func (s *jwks) missed(kid string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.miss == nil {
		s.miss = make(map[string]struct{})
	}
	if len(s.miss) < maxMissed {
		s.miss[kid] = struct{}{}
	}
}

// fetch gets, parses and installs the key set.
func (s *jwks) fetch() error {
	ctx, cancel := context.WithTimeout(s.ctx, s.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %s", resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxJWKSBytes+1))
	if err != nil {
		return err
	}
	if len(body) > maxJWKSBytes {
		return fmt.Errorf("key set larger than %d bytes", maxJWKSBytes)
	}
	keys, skipped, err := parseJWKS(body)
	if err != nil {
		return err
	}
	for _, why := range skipped {
		s.log.Debug("wizard: gateway: auth: JWKS key skipped", "url", s.url, "reason", why)
	}
	s.install(keys)
	return nil
}

// jwk is the part of a JSON Web Key (RFC 7517, 7518, 8037) the gateway
// reads.
type jwk struct {
	Kty string `json:"kty"`
	Kid string `json:"kid"`
	Use string `json:"use"`
	Alg string `json:"alg"`
	N   string `json:"n"`
	E   string `json:"e"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Y   string `json:"y"`
}

// parseJWKS reads a JWKS document: the usable signature keys, and why each
// other key was skipped. A document with no usable key is an error.
func parseJWKS(b []byte) ([]verifyKey, []string, error) {
	var doc struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, nil, fmt.Errorf("key set is not a JWKS: %w", err)
	}
	if len(doc.Keys) > maxJWKSKeys {
		return nil, nil, fmt.Errorf("key set has %d keys, more than %d", len(doc.Keys), maxJWKSKeys)
	}
	var keys []verifyKey
	var skipped []string
	for i, raw := range doc.Keys {
		var k jwk
		if err := json.Unmarshal(raw, &k); err != nil {
			skipped = append(skipped, fmt.Sprintf("key %d: %v", i+1, err))
			continue
		}
		vk, err := k.verifyKey()
		if err != nil {
			skipped = append(skipped, fmt.Sprintf("key %d%s: %v", i+1, kidNote(k.Kid), err))
			continue
		}
		keys = append(keys, vk)
	}
	if len(keys) == 0 {
		return nil, skipped, fmt.Errorf("key set has no usable signature key (%d skipped)", len(skipped))
	}
	return keys, skipped, nil
}

var b64 = base64.RawURLEncoding

// verifyKey checks k and returns its public key.
func (k *jwk) verifyKey() (verifyKey, error) {
	if k.Use != "" && k.Use != "sig" {
		return verifyKey{}, fmt.Errorf("use %q is not sig", k.Use)
	}
	var vk verifyKey
	var err error
	switch k.Kty {
	case "RSA":
		vk, err = k.rsa()
	case "EC":
		vk, err = k.ec()
	case "OKP":
		vk, err = k.okp()
	default:
		return verifyKey{}, fmt.Errorf("kty %q is not RSA, EC or OKP", k.Kty)
	}
	if err != nil {
		return verifyKey{}, err
	}
	vk.kid, vk.alg = k.Kid, k.Alg
	if k.Alg != "" && algKinds[k.Alg] != vk.kind {
		return verifyKey{}, fmt.Errorf("alg %q does not fit a %s", k.Alg, vk.kind)
	}
	return vk, nil
}

func (k *jwk) rsa() (verifyKey, error) {
	n, err := b64.DecodeString(k.N)
	if err != nil || len(n) == 0 {
		return verifyKey{}, errors.New("RSA modulus n is not base64url")
	}
	e, err := b64.DecodeString(k.E)
	if err != nil || len(e) == 0 || len(e) > 4 {
		return verifyKey{}, errors.New("RSA exponent e is not a base64url integer of up to 4 bytes")
	}
	exp := int(new(big.Int).SetBytes(e).Int64())
	if exp < 3 || exp%2 == 0 {
		return verifyKey{}, fmt.Errorf("RSA exponent %d is not odd and at least 3", exp)
	}
	return publicKey(&rsa.PublicKey{N: new(big.Int).SetBytes(n), E: exp})
}

func (k *jwk) ec() (verifyKey, error) {
	var c elliptic.Curve
	switch k.Crv {
	case "P-256":
		c = elliptic.P256()
	case "P-384":
		c = elliptic.P384()
	case "P-521":
		c = elliptic.P521()
	default:
		return verifyKey{}, fmt.Errorf("EC curve %q is not P-256, P-384 or P-521", k.Crv)
	}
	size := (c.Params().BitSize + 7) / 8
	x, errX := b64.DecodeString(k.X)
	y, errY := b64.DecodeString(k.Y)
	if errX != nil || errY != nil || len(x) != size || len(y) != size {
		return verifyKey{}, fmt.Errorf("EC coordinates are not base64url of %d bytes", size)
	}
	point := append(append([]byte{4}, x...), y...)
	pub, err := ecdsa.ParseUncompressedPublicKey(c, point)
	if err != nil {
		return verifyKey{}, fmt.Errorf("EC point: %w", err)
	}
	return publicKey(pub)
}

func (k *jwk) okp() (verifyKey, error) {
	if k.Crv != "Ed25519" {
		return verifyKey{}, fmt.Errorf("OKP curve %q is not Ed25519", k.Crv)
	}
	x, err := b64.DecodeString(k.X)
	if err != nil || len(x) != ed25519.PublicKeySize {
		return verifyKey{}, fmt.Errorf("Ed25519 x is not base64url of %d bytes", ed25519.PublicKeySize)
	}
	return publicKey(ed25519.PublicKey(x))
}
