package auth_test

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/wizardmesh/wizard/gateway/auth"
	"github.com/wizardmesh/wizard/runtime"
)

const authPattern = "role:auth,cmd:verify"

// authService is an auth handler on a real node: it answers fn's result
// and counts its calls.
type authService struct {
	node  *runtime.Node
	calls atomic.Int32
}

func newAuthService(t testing.TB, fn func(ctx context.Context, token string) (any, error)) *authService {
	t.Helper()
	n, err := runtime.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close() })
	s := &authService{node: n}
	if fn == nil {
		return s
	}
	err = n.Add(authPattern, func(ctx context.Context, req runtime.Request) (any, error) {
		s.calls.Add(1)
		tok, _ := req.Get("token").(string)
		return fn(ctx, tok)
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func newDelegate(t testing.TB, o auth.DelegateOptions) *auth.Delegate {
	t.Helper()
	if o.Pattern == "" {
		o.Pattern = authPattern
	}
	d, err := auth.NewDelegate(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// answerFor answers like an auth service for the token "good", valid for
// an hour.
func answerFor(exp any) func(context.Context, string) (any, error) {
	return func(_ context.Context, tok string) (any, error) {
		if tok != "good" {
			return nil, runtime.Errorf(runtime.CodeUnauthenticated, "token %s is not known", tok)
		}
		return map[string]any{
			"subject":    "u_1",
			"scopes":     []any{"orders:read", "orders:write"},
			"expires_at": exp,
			"issuer":     "auth-service",
			"claims":     map[string]any{"tenant": "t_9"},
		}, nil
	}
}

func TestDelegateAnswerAndCache(t *testing.T) {
	exp := time.Now().Add(time.Hour).Truncate(time.Second)
	for _, tt := range []struct {
		name string
		exp  any
	}{
		{"RFC 3339", exp.Format(time.RFC3339)},
		{"unix seconds", exp.Unix()},
		{"unix seconds as a string", strconv.FormatInt(exp.Unix(), 10)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			svc := newAuthService(t, answerFor(tt.exp))
			d := newDelegate(t, auth.DelegateOptions{Caller: svc.node})
			want := &auth.Identity{
				Subject:   "u_1",
				Issuer:    "auth-service",
				Scopes:    []string{"orders:read", "orders:write"},
				ExpiresAt: exp,
				Claims:    map[string]any{"tenant": "t_9"},
			}
			for i := range 3 {
				id, err := d.Verify(t.Context(), "good")
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(want, id, cmp.Comparer(time.Time.Equal)); diff != "" {
					t.Errorf("verify %d: identity (-want +got):\n%s", i+1, diff)
				}
			}
			if got := svc.calls.Load(); got != 1 {
				t.Errorf("%d handler calls for 3 verifications, want 1 (cached)", got)
			}
		})
	}
}

func TestDelegateErrors(t *testing.T) {
	hour := time.Now().Add(time.Hour).Unix()
	tests := []struct {
		name   string
		fn     func(context.Context, string) (any, error) // nil: no handler
		token  string
		reason auth.Reason
		status int
	}{
		{"refused", answerFor(hour), "forged-token-123", auth.ReasonRejected, 401},
		{"permission denied", errorsWith(runtime.CodePermissionDenied), "tok-7f3a9c", auth.ReasonRejected, 401},
		{"invalid argument", errorsWith(runtime.CodeInvalidArgument), "tok-7f3a9c", auth.ReasonRejected, 401},
		{"internal", errorsWith(runtime.CodeInternal), "tok-7f3a9c", auth.ReasonUnavailable, 503},
		{"unavailable", errorsWith(runtime.CodeUnavailable), "tok-7f3a9c", auth.ReasonUnavailable, 503},
		{"plain error", func(context.Context, string) (any, error) { return nil, errors.New("db down") }, "tok-7f3a9c", auth.ReasonUnavailable, 503},
		{"no handler", nil, "tok-7f3a9c", auth.ReasonUnavailable, 503},
		{"expired answer", answerFor(time.Now().Add(-time.Second).Unix()), "good", auth.ReasonExpired, 401},
		{"no expires_at", answers(map[string]any{"subject": "u"}), "tok-7f3a9c", auth.ReasonUnavailable, 503},
		{"bad expires_at", answers(map[string]any{"subject": "u", "expires_at": "soon"}), "tok-7f3a9c", auth.ReasonUnavailable, 503},
		{"no subject", answers(map[string]any{"expires_at": hour}), "tok-7f3a9c", auth.ReasonUnavailable, 503},
		{"not an object", answers("yes"), "tok-7f3a9c", auth.ReasonUnavailable, 503},
		{"empty token", answerFor(hour), "", auth.ReasonMissing, 401},
		{"token too large", answerFor(hour), strings.Repeat("a", 16<<10+1), auth.ReasonMalformed, 401},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc := newAuthService(t, tt.fn)
			d := newDelegate(t, auth.DelegateOptions{Caller: svc.node})
			id, err := d.Verify(t.Context(), tt.token)
			e := auth.ErrorOf(err)
			if e == nil {
				t.Fatalf("Verify = %+v, want an error", id)
			}
			if e.Reason != tt.reason || e.Status() != tt.status {
				t.Errorf("%v: reason %q status %d, want %q %d", err, e.Reason, e.Status(), tt.reason, tt.status)
			}
			if len(tt.token) > 0 && strings.Contains(err.Error(), tt.token) {
				t.Errorf("the error echoes the token: %v", err)
			}
			// Failures are not cached.
			if _, err := d.Verify(t.Context(), tt.token); err == nil {
				t.Error("second Verify succeeded")
			}
			if tt.fn != nil && tt.reason != auth.ReasonMissing && tt.reason != auth.ReasonMalformed {
				if got := svc.calls.Load(); got != 2 {
					t.Errorf("%d handler calls, want 2 (failures not cached)", got)
				}
			}
		})
	}
}

func errorsWith(c runtime.Code) func(context.Context, string) (any, error) {
	return func(context.Context, string) (any, error) { return nil, runtime.NewError(c, "no") }
}

func answers(v any) func(context.Context, string) (any, error) {
	return func(context.Context, string) (any, error) { return v, nil }
}

// TestDelegateExpiry: on a fake clock, an answer is served from the cache
// until its expires_at, or MaxCacheTTL if sooner, then asked again.
func TestDelegateExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		svc := newAuthService(t, func(context.Context, string) (any, error) {
			return map[string]any{"subject": "u_1", "expires_at": time.Now().Add(time.Minute).Format(time.RFC3339Nano)}, nil
		})
		d := newDelegate(t, auth.DelegateOptions{Caller: svc.node})
		capped := newDelegate(t, auth.DelegateOptions{Caller: svc.node, MaxCacheTTL: 10 * time.Second})
		verify := func(d *auth.Delegate, want int32, when string) {
			t.Helper()
			before := svc.calls.Load()
			if _, err := d.Verify(t.Context(), "tok"); err != nil {
				t.Fatalf("%s: %v", when, err)
			}
			if got := svc.calls.Load() - before; got != want {
				t.Errorf("%s: %d handler calls, want %d", when, got, want)
			}
		}
		verify(d, 1, "first")
		verify(capped, 1, "first, capped")
		time.Sleep(10*time.Second - time.Nanosecond)
		verify(d, 0, "10s in")
		verify(capped, 0, "10s in, capped")
		time.Sleep(time.Nanosecond)
		verify(capped, 1, "at MaxCacheTTL")
		time.Sleep(50*time.Second - time.Nanosecond)
		verify(d, 0, "just before expiry")
		time.Sleep(time.Nanosecond)
		verify(d, 1, "at expiry")
		verify(d, 0, "after the new answer")
	})
}

// TestDelegateTimeout: a handler that does not answer fails closed (503)
// after the delegate's Timeout; so does a waiter whose own context ends.
func TestDelegateTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		svc := newAuthService(t, func(ctx context.Context, _ string) (any, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		})
		d := newDelegate(t, auth.DelegateOptions{Caller: svc.node, Timeout: 300 * time.Millisecond})
		start := time.Now()
		_, err := d.Verify(t.Context(), "tok")
		e := auth.ErrorOf(err)
		if e == nil || e.Status() != http.StatusServiceUnavailable || e.WWWAuthenticate() != "" {
			t.Fatalf("Verify against a silent handler: %v, want 503 without WWW-Authenticate", err)
		}
		if got := time.Since(start); got != 300*time.Millisecond {
			t.Errorf("failed after %v, want the 300ms timeout", got)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		start = time.Now()
		if _, err := d.Verify(ctx, "tok"); auth.ErrorOf(err).Status() != http.StatusServiceUnavailable || time.Since(start) != 100*time.Millisecond {
			t.Errorf("Verify with a 100ms context: %v after %v, want 503 after 100ms", err, time.Since(start))
		}
	})
}

// TestDelegateSharesOneCall: concurrent verifications of one token make
// one handler call and get the same identity; another token its own call.
func TestDelegateSharesOneCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		svc := newAuthService(t, func(ctx context.Context, tok string) (any, error) {
			<-release
			return map[string]any{"subject": tok, "expires_at": time.Now().Add(time.Hour).Unix()}, nil
		})
		d := newDelegate(t, auth.DelegateOptions{Caller: svc.node})
		const n = 50
		ids := make([]*auth.Identity, n)
		var wg sync.WaitGroup
		for i := range n {
			tok := "one"
			if i == n-1 {
				tok = "two"
			}
			wg.Go(func() {
				id, err := d.Verify(t.Context(), tok)
				if err != nil {
					t.Error(err)
				}
				ids[i] = id
			})
		}
		synctest.Wait() // all wait: the handlers are held
		if got := svc.calls.Load(); got != 2 {
			t.Errorf("%d handler calls for %d concurrent verifications of 2 tokens, want 2", got, n)
		}
		close(release)
		wg.Wait()
		for i := range n - 1 {
			if ids[i] != ids[0] || ids[i].Subject != "one" {
				t.Fatalf("verification %d got %+v, not the shared identity %+v", i, ids[i], ids[0])
			}
		}
		if ids[n-1].Subject != "two" {
			t.Errorf("the other token got %+v", ids[n-1])
		}
	})
}

// TestDelegateCallerGoneKeepsTheCall: a caller that stops waiting does not
// cancel the call the others (and the cache) wait for.
func TestDelegateCallerGoneKeepsTheCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		svc := newAuthService(t, func(ctx context.Context, tok string) (any, error) {
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return map[string]any{"subject": tok, "expires_at": time.Now().Add(time.Hour).Unix()}, nil
		})
		d := newDelegate(t, auth.DelegateOptions{Caller: svc.node})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() {
			_, err := d.Verify(ctx, "tok")
			done <- err
		}()
		synctest.Wait()
		cancel()
		if err := <-done; auth.ErrorOf(err).Status() != http.StatusServiceUnavailable || !errors.Is(err, context.Canceled) {
			t.Errorf("canceled caller: %v, want 503 caused by context.Canceled", err)
		}
		close(release)
		synctest.Wait()
		if _, err := d.Verify(t.Context(), "tok"); err != nil {
			t.Fatal(err)
		}
		if got := svc.calls.Load(); got != 1 {
			t.Errorf("%d handler calls, want 1 (the call went on and was cached)", got)
		}
	})
}

// TestDelegateMaxInFlight: beyond MaxInFlight calls in progress, a token
// that needs a new call fails closed; one that shares a call still waits.
func TestDelegateMaxInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		svc := newAuthService(t, func(ctx context.Context, tok string) (any, error) {
			<-release
			return map[string]any{"subject": tok, "expires_at": time.Now().Add(time.Hour).Unix()}, nil
		})
		d := newDelegate(t, auth.DelegateOptions{Caller: svc.node, MaxInFlight: 2, Timeout: time.Minute})
		var wg sync.WaitGroup
		for _, tok := range []string{"a", "b", "a"} {
			wg.Go(func() {
				if _, err := d.Verify(t.Context(), tok); err != nil {
					t.Errorf("token %s: %v", tok, err)
				}
			})
		}
		synctest.Wait()
		if _, err := d.Verify(t.Context(), "c"); auth.ErrorOf(err).Status() != http.StatusServiceUnavailable {
			t.Errorf("a third call: %v, want 503", err)
		}
		close(release)
		wg.Wait()
		if _, err := d.Verify(t.Context(), "c"); err != nil {
			t.Errorf("after the calls ended: %v", err)
		}
	})
}

func TestDelegateClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		svc := newAuthService(t, func(ctx context.Context, _ string) (any, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		})
		d, err := auth.NewDelegate(auth.DelegateOptions{Caller: svc.node, Pattern: authPattern, Timeout: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error)
		go func() {
			_, err := d.Verify(t.Context(), "tok")
			done <- err
		}()
		synctest.Wait()
		_ = d.Close()
		if err := <-done; auth.ErrorOf(err).Status() != http.StatusServiceUnavailable {
			t.Errorf("Verify during Close: %v, want 503", err)
		}
		if _, err := d.Verify(t.Context(), "tok"); auth.ErrorOf(err).Status() != http.StatusServiceUnavailable {
			t.Errorf("Verify after Close: %v, want 503", err)
		}
		_ = d.Close()
	})
}

func TestNewDelegateErrors(t *testing.T) {
	node := newAuthService(t, nil).node
	tests := []struct {
		name string
		o    auth.DelegateOptions
		want string
	}{
		{"no caller", auth.DelegateOptions{Pattern: authPattern}, "Caller is nil"},
		{"no pattern", auth.DelegateOptions{Caller: node}, "Pattern is empty"},
		{"bad pattern", auth.DelegateOptions{Caller: node, Pattern: "role"}, `Pattern "role": `},
		{"negative timeout", auth.DelegateOptions{Caller: node, Pattern: authPattern, Timeout: -1}, "Timeout -1ns is negative"},
		{"negative entries", auth.DelegateOptions{Caller: node, Pattern: authPattern, CacheEntries: -1}, "CacheEntries -1 is negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := auth.NewDelegate(tt.o)
			if err == nil || !strings.HasPrefix(err.Error(), "wizard: gateway: auth: delegate: ") || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one with %q", err, tt.want)
			}
		})
	}
}
