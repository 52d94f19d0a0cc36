package auth_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/wizardmesh/wizard/gateway/auth"
)

// keyServer serves a JWKS that a test changes, counting requests; with
// block set, a request waits until the test releases it.
type keyServer struct {
	mu       sync.Mutex
	doc      []byte
	status   int
	block    chan struct{} // if not nil, requests wait for it to close
	arrived  chan struct{} // a request arrived (buffered)
	requests atomic.Int32
}

func newKeyServer(doc []byte) *keyServer {
	return &keyServer{doc: doc, status: http.StatusOK, arrived: make(chan struct{}, 64)}
}

func (s *keyServer) set(doc []byte, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.doc, s.status = doc, status
}

// hold makes the next requests wait until the returned release is called.
func (s *keyServer) hold() (release func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := make(chan struct{})
	s.block = ch
	var once sync.Once
	return func() { once.Do(func() { close(ch) }) }
}

// answer serves one request, waiting first if held, unless ctx ends.
func (s *keyServer) answer(ctx context.Context) (int, []byte, error) {
	s.requests.Add(1)
	s.mu.Lock()
	block := s.block
	s.mu.Unlock()
	select {
	case s.arrived <- struct{}{}:
	default:
	}
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			return 0, nil, ctx.Err()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.status, s.doc, nil
}

func (s *keyServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	status, doc, err := s.answer(r.Context())
	if err != nil {
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(doc)
}

// RoundTrip serves the key set in memory, for tests under synctest, where
// no real network may be used.
func (s *keyServer) RoundTrip(r *http.Request) (*http.Response, error) {
	status, doc, err := s.answer(r.Context())
	if err != nil {
		return nil, err
	}
	return &http.Response{StatusCode: status, Status: http.StatusText(status), Body: io.NopCloser(bytes.NewReader(doc)), Request: r}, nil
}

// serve starts s on 127.0.0.1.
func (s *keyServer) serve(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return srv.URL + "/.well-known/jwks.json"
}

// deadURL is the URL of a server that no longer listens.
func deadURL(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.NotFoundHandler())
	u := srv.URL + "/jwks.json"
	srv.Close()
	return u
}

func TestJWKSRotation(t *testing.T) {
	a, b := rsaKeys()[0], rsaKeys()[1]
	ks := newKeyServer(jwksOf(t, jwkOf(t, "a", &a.PublicKey), jwkOf(t, "e", &ecKey().PublicKey), jwkOf(t, "d", edKey().Public())))
	j := newJWT(t, auth.JWTOptions{JWKSURL: ks.serve(t), JWKSMinRefresh: time.Nanosecond})
	tokA := sign(t, jwt.SigningMethodRS256, a, "a", claims(nil))
	tokB := sign(t, jwt.SigningMethodRS256, b, "b", claims(nil))
	for _, tok := range []string{tokA, sign(t, jwt.SigningMethodES256, ecKey(), "e", claims(nil)), sign(t, jwt.SigningMethodEdDSA, edKey(), "d", claims(nil))} {
		if _, err := j.Verify(t.Context(), tok); err != nil {
			t.Fatal(err)
		}
	}
	if got := ks.requests.Load(); got != 1 {
		t.Fatalf("%d JWKS requests after start and known kids, want 1", got)
	}

	// Rotation: b appears, a goes. The first token of b fetches the set.
	ks.set(jwksOf(t, jwkOf(t, "b", &b.PublicKey)), http.StatusOK)
	if _, err := j.Verify(t.Context(), tokB); err != nil {
		t.Fatalf("token of the new kid: %v", err)
	}
	if got := ks.requests.Load(); got != 2 {
		t.Errorf("%d JWKS requests after the new kid, want 2", got)
	}
	if _, err := j.Verify(t.Context(), tokA); reasonOf(err) != auth.ReasonUnknownKey {
		t.Errorf("token of the removed kid: %v, want %q", err, auth.ReasonUnknownKey)
	}
	// A key set the server breaks keeps the keys there are.
	ks.set([]byte(`{"keys": []}`), http.StatusOK)
	if _, err := j.Verify(t.Context(), sign(t, jwt.SigningMethodRS256, a, "zz", claims(nil))); reasonOf(err) != auth.ReasonUnknownKey {
		t.Errorf("unknown kid against an empty set: %v", err)
	}
	if _, err := j.Verify(t.Context(), tokB); err != nil {
		t.Errorf("after a failed refresh: %v", err)
	}
}

// TestJWKSUnknownKidsDoNotStallKnownOnes holds the JWKS server while a
// burst of tokens with unknown kids waits for the refresh they triggered:
// tokens of known kids verify meanwhile, and the burst made one request.
func TestJWKSUnknownKidsDoNotStallKnownOnes(t *testing.T) {
	a, c := rsaKeys()[0], rsaKeys()[2]
	ks := newKeyServer(jwksOf(t, jwkOf(t, "a", &a.PublicKey)))
	j := newJWT(t, auth.JWTOptions{JWKSURL: ks.serve(t), JWKSMinRefresh: time.Nanosecond})
	<-ks.arrived // the start's request
	release := ks.hold()
	defer release()

	const burst = 64
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	errs := make(chan error, burst)
	for i := range burst {
		kid := "c"
		if i%2 == 1 {
			kid = fmt.Sprintf("garbage-%d", i)
		}
		tok := sign(t, jwt.SigningMethodRS256, c, kid, claims(nil))
		go func() {
			_, err := j.Verify(ctx, tok)
			errs <- err
		}()
	}
	select {
	case <-ks.arrived:
	case <-time.After(30 * time.Second):
		t.Fatal("no refresh request after a burst of unknown kids")
	}
	known := sign(t, jwt.SigningMethodRS256, a, "a", claims(nil))
	for range 100 {
		if _, err := j.Verify(t.Context(), known); err != nil {
			t.Fatalf("known kid while the refresh is held: %v", err)
		}
	}
	if got := ks.requests.Load(); got != 2 {
		t.Errorf("%d JWKS requests with the refresh held, want 2 (start and one refresh)", got)
	}
	// The set with c arrives: the tokens of c verify, the garbage fails.
	ks.set(jwksOf(t, jwkOf(t, "a", &a.PublicKey), jwkOf(t, "c", &c.PublicKey)), http.StatusOK)
	release()
	var ok, unknown int
	for range burst {
		select {
		case err := <-errs:
			switch reasonOf(err) {
			case 0:
				ok++
			case auth.ReasonUnknownKey:
				unknown++
			default:
				t.Errorf("burst token: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("burst tokens still waiting after the refresh")
		}
	}
	if ok != burst/2 || unknown != burst/2 {
		t.Errorf("burst: %d verified and %d unknown, want %d each", ok, unknown, burst/2)
	}
}

// TestJWKSRefreshTiming checks, on a fake clock, that unknown kids fetch at
// most once per minimum interval, that the set is refreshed in the
// background, and that a failed refresh is retried sooner, with backoff.
func TestJWKSRefreshTiming(t *testing.T) {
	a, b := rsaKeys()[0], rsaKeys()[1]
	synctest.Test(t, func(t *testing.T) {
		ks := newKeyServer(jwksOf(t, jwkOf(t, "a", &a.PublicKey)))
		j, err := auth.NewJWT(auth.JWTOptions{
			JWKSURL:        "https://id.test/jwks.json",
			HTTPClient:     &http.Client{Transport: ks},
			JWKSRefresh:    time.Minute,
			JWKSMinRefresh: 5 * time.Second,
		})
		if err != nil {
			t.Fatal(err)
		}
		defer j.Close()
		requests := func(want int32, when string) {
			t.Helper()
			synctest.Wait()
			if got := ks.requests.Load(); got != want {
				t.Errorf("%s: %d requests, want %d", when, got, want)
			}
		}
		unknown := sign(t, jwt.SigningMethodRS256, b, "b", claims(nil))
		verify := func(want auth.Reason, when string) {
			t.Helper()
			if _, err := j.Verify(t.Context(), unknown); reasonOf(err) != want {
				t.Errorf("%s: %v, want reason %q", when, err, want)
			}
		}
		requests(1, "start")
		// A kid no fetch was asked for waits for the next fetch the
		// interval allows (5s after the start's).
		start := time.Now()
		verify(auth.ReasonUnknownKey, "unknown kid right after the start")
		if d := time.Since(start); d != 5*time.Second {
			t.Errorf("unknown kid right after the start answered after %v, want 5s (the next fetch allowed)", d)
		}
		requests(2, "unknown kid right after the start")
		verify(auth.ReasonUnknownKey, "the same kid again")
		requests(2, "the same kid, which the last fetch did not bring")
		if d := time.Since(start); d != 5*time.Second {
			t.Errorf("a kid the last fetch did not bring waited %v, want none", d-5*time.Second)
		}
		time.Sleep(5 * time.Second)
		verify(auth.ReasonUnknownKey, "unknown kid after 5s")
		requests(3, "unknown kid after 5s")
		time.Sleep(4 * time.Second)
		verify(auth.ReasonUnknownKey, "unknown kid 4s later")
		requests(3, "unknown kid 4s later")

		// The background refresh a minute after the start brings b.
		ks.set(jwksOf(t, jwkOf(t, "b", &b.PublicKey)), http.StatusOK)
		time.Sleep(time.Minute - 14*time.Second)
		requests(4, "a minute after the start")
		if _, err := j.Verify(t.Context(), unknown); err != nil {
			t.Errorf("after the background refresh: %v", err)
		}
		requests(4, "the kid the refresh brought")

		// A failing server: retried after 5s, 10s, 20s, ..., the keys kept.
		ks.set(nil, http.StatusInternalServerError)
		time.Sleep(time.Minute)
		requests(5, "the refresh that fails")
		for i, wait := range []time.Duration{5 * time.Second, 10 * time.Second, 20 * time.Second, 40 * time.Second, time.Minute} {
			time.Sleep(wait - time.Millisecond)
			requests(int32(6+i-1), fmt.Sprintf("just before retry %d", i+1))
			time.Sleep(time.Millisecond)
			requests(int32(6+i), fmt.Sprintf("retry %d after %v", i+1, wait))
		}
		if _, err := j.Verify(t.Context(), unknown); err != nil {
			t.Errorf("with the server failing: %v", err)
		}
	})
}

// TestJWKSNewKeyAfterUnknownKid: after a token whose kid the JWKS does
// not have, a token of a key the JWKS has gained since verifies (on the
// next fetch the minimum interval allows), not 401 until a later one;
// the garbage kid stays refused.
func TestJWKSNewKeyAfterUnknownKid(t *testing.T) {
	a, b := rsaKeys()[0], rsaKeys()[1]
	synctest.Test(t, func(t *testing.T) {
		ks := newKeyServer(jwksOf(t, jwkOf(t, "a", &a.PublicKey)))
		j := jwksVerifier(t, ks)
		start := time.Now()
		time.Sleep(3 * time.Second)
		garbage := sign(t, jwt.SigningMethodRS256, b, "garbage", claims(nil))
		if _, err := j.Verify(t.Context(), garbage); reasonOf(err) != auth.ReasonUnknownKey {
			t.Fatalf("unknown kid: %v", err)
		}
		ks.set(jwksOf(t, jwkOf(t, "a", &a.PublicKey), jwkOf(t, "b", &b.PublicKey)), http.StatusOK) // the key rotates in
		if _, err := j.Verify(t.Context(), sign(t, jwt.SigningMethodRS256, b, "b", claims(nil))); err != nil {
			t.Errorf("the new key right after an unknown kid: %v, want it verified", err)
		}
		if _, err := j.Verify(t.Context(), garbage); reasonOf(err) != auth.ReasonUnknownKey {
			t.Errorf("the unknown kid again: %v", err)
		}
		synctest.Wait()
		// The start, the unknown kid, the new key, the unknown kid that
		// the last fetch was not asked for: one each 3s, no more.
		if got, took := ks.requests.Load(), time.Since(start); got != 4 || took != 9*time.Second {
			t.Errorf("%d JWKS requests in %v, want 4 in 9s", got, took)
		}
	})
}

// TestJWKSBurstOnFakeClock: under synctest, a burst of unknown kids waits
// on one fetch, which the test holds; known kids verify meanwhile.
func TestJWKSBurstOnFakeClock(t *testing.T) {
	a, c := rsaKeys()[0], rsaKeys()[2]
	synctest.Test(t, func(t *testing.T) {
		ks := newKeyServer(jwksOf(t, jwkOf(t, "a", &a.PublicKey)))
		j, err := auth.NewJWT(auth.JWTOptions{JWKSURL: "https://id.test/jwks.json", HTTPClient: &http.Client{Transport: ks}})
		if err != nil {
			t.Fatal(err)
		}
		defer j.Close()
		time.Sleep(5 * time.Second)
		release := ks.hold()
		tok := sign(t, jwt.SigningMethodRS256, c, "c", claims(nil))
		var wg sync.WaitGroup
		var failed atomic.Int32
		for range 200 {
			wg.Go(func() {
				if _, err := j.Verify(t.Context(), tok); err != nil {
					failed.Add(1)
				}
			})
		}
		synctest.Wait() // all 200 wait on the held fetch
		if got := ks.requests.Load(); got != 2 {
			t.Errorf("%d requests with 200 unknown kids waiting, want 2", got)
		}
		if _, err := j.Verify(t.Context(), sign(t, jwt.SigningMethodRS256, a, "a", claims(nil))); err != nil {
			t.Errorf("known kid during the burst: %v", err)
		}
		ks.set(jwksOf(t, jwkOf(t, "c", &c.PublicKey)), http.StatusOK)
		release()
		wg.Wait()
		if n := failed.Load(); n != 0 {
			t.Errorf("%d of 200 burst tokens failed", n)
		}

		// A fetch that hangs ends at JWKSTimeout (10s); waiters whose
		// context ends first get 503.
		time.Sleep(5 * time.Second)
		release = ks.hold()
		defer release()
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		_, err = j.Verify(ctx, sign(t, jwt.SigningMethodRS256, c, "new", claims(nil)))
		if e := auth.ErrorOf(err); e == nil || e.Status() != http.StatusServiceUnavailable {
			t.Errorf("waiting on a hung fetch past the context: %v, want 503", err)
		}
		start := time.Now()
		_, err = j.Verify(t.Context(), sign(t, jwt.SigningMethodRS256, c, "new", claims(nil)))
		if reasonOf(err) != auth.ReasonUnknownKey || time.Since(start) != 9*time.Second {
			t.Errorf("waiting on a hung fetch: %v after %v, want %q after 9s (the fetch's 10s timeout)", err, time.Since(start), auth.ReasonUnknownKey)
		}
	})
}

// TestJWKSOverTLS fetches the key set over https, with the client of the
// test server's certificate, as a deployment would.
func TestJWKSOverTLS(t *testing.T) {
	ks := newKeyServer(jwksOf(t, jwkOf(t, "e", &ecKey().PublicKey)))
	srv := httptest.NewTLSServer(ks)
	t.Cleanup(srv.Close)
	j := newJWT(t, auth.JWTOptions{JWKSURL: srv.URL + "/jwks.json", HTTPClient: srv.Client(), Algorithms: []string{"ES256"}})
	if _, err := j.Verify(t.Context(), sign(t, jwt.SigningMethodES256, ecKey(), "e", claims(nil))); err != nil {
		t.Fatal(err)
	}
	if _, err := auth.NewJWT(auth.JWTOptions{JWKSURL: srv.URL + "/jwks.json", JWKSTimeout: 10 * time.Second}); err == nil {
		t.Error("NewJWT trusted the test server's certificate without its client")
	}
}

// TestJWKSRedirect: the default client follows a redirect on loopback but
// not one that leaves https for http elsewhere.
func TestJWKSRedirect(t *testing.T) {
	ks := newKeyServer(jwksOf(t, jwkOf(t, "e", &ecKey().PublicKey)))
	target := ks.serve(t)
	mux := http.NewServeMux()
	mux.Handle("/ok", http.RedirectHandler(target, http.StatusFound))
	mux.Handle("/away", http.RedirectHandler("http://id.example.com/jwks.json", http.StatusFound))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	newJWT(t, auth.JWTOptions{JWKSURL: srv.URL + "/ok"})
	_, err := auth.NewJWT(auth.JWTOptions{JWKSURL: srv.URL + "/away"})
	if err == nil || !strings.Contains(err.Error(), "http is allowed for loopback hosts only") {
		t.Errorf("redirect to http elsewhere: %v, want refused", err)
	}
}
