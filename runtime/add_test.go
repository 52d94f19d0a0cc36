package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/introspect"
	"github.com/wizardmesh/wizard/runtime/pattern"
)

func TestAdd_OverridePriorRemove(t *testing.T) {
	t.Run("override makes the old handler the prior", func(t *testing.T) {
		n := newTestNode(t)
		mustAdd(t, n, "p:1", func(ctx context.Context, r runtime.Request) (any, error) {
			return fmt.Sprintf("one(%v)", r.Get("x")), nil
		})
		mustAdd(t, n, "p:1", func(ctx context.Context, r runtime.Request) (any, error) {
			prior, err := r.Prior(ctx, map[string]any{"x": "from two"})
			return fmt.Sprintf("two>%v", prior), err
		}, runtime.Override())
		mustAdd(t, n, "p : 1", func(ctx context.Context, r runtime.Request) (any, error) {
			prior, err := r.Prior(ctx, r.Msg())
			return fmt.Sprintf("three>%v", prior), err
		}, runtime.Override())
		res, err := n.Act(t.Context(), "p:1", nil)
		if err != nil {
			t.Fatalf("Act: %v", err)
		}
		if diff := cmp.Diff("three>two>one(from two)", res.Value()); diff != "" {
			t.Errorf("Value() mismatch (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"p:1"}, patternStringsOf(n.Patterns())); diff != "" {
			t.Errorf("Patterns() mismatch (-want +got):\n%s", diff)
		}
	})

	t.Run("prior without a prior is not found", func(t *testing.T) {
		n := newTestNode(t)
		h := func(ctx context.Context, r runtime.Request) (any, error) { return r.Prior(ctx, r.Msg()) }
		mustAdd(t, n, "p:1", h)
		mustAdd(t, n, "p:2", h, runtime.Override()) // Override of nothing: still no prior
		for _, p := range []string{"p:1", "p:2"} {
			_, err := n.Act(t.Context(), p, nil)
			wantCode(t, err, runtime.CodeNotFound)
			if !errors.Is(err, runtime.ErrNotFound) || !strings.Contains(err.Error(), p) {
				t.Errorf("Act(%q) error = %v, want ErrNotFound naming the pattern", p, err)
			}
		}
	})

	t.Run("a prior's error and panic reach the caller", func(t *testing.T) {
		n := newTestNode(t)
		mustAdd(t, n, "p:1", func(ctx context.Context, r runtime.Request) (any, error) {
			if r.Get("panic") == true {
				panic("prior panicked")
			}
			return nil, runtime.NewError(runtime.CodePermissionDenied, "wizard: prior says no")
		})
		mustAdd(t, n, "p:1", func(ctx context.Context, r runtime.Request) (any, error) {
			return r.Prior(ctx, r.Msg())
		}, runtime.Override())
		_, err := n.Act(t.Context(), "p:1", nil)
		wantCode(t, err, runtime.CodePermissionDenied)
		_, err = n.Act(t.Context(), "p:1", map[string]any{"panic": true})
		wantCode(t, err, runtime.CodeInternal)
	})

	t.Run("duplicate without override", func(t *testing.T) {
		n := newTestNode(t)
		mustAdd(t, n, "b:2,a:1", replyMsg("first"))
		err := n.Add("a:1, b:2", replyMsg("second"))
		wantCode(t, err, runtime.CodeAlreadyExists)
		if !strings.Contains(err.Error(), "a:1,b:2") {
			t.Errorf("error %q does not name the pattern", err)
		}
		res, err := n.Act(t.Context(), "a:1,b:2", nil)
		if err != nil || res.Value() != "first" {
			t.Errorf("after a failed Add: Act = %v, %v; want the first handler", res.Value(), err)
		}
	})

	t.Run("remove", func(t *testing.T) {
		n := newTestNode(t)
		mustAdd(t, n, "r:1", replyMsg("one"))
		mustAdd(t, n, "r:1", replyMsg("override"), runtime.Override())
		mustAdd(t, n, "r:1,s:2", replyMsg("narrow"))
		// Resolve once, so a cached resolution must be dropped by Remove.
		if res, err := n.ActE(t.Context(), "r:1", nil); err != nil || res.Value() != "override" {
			t.Fatalf("ActE before Remove = %v, %v", res.Value(), err)
		}
		ok, err := n.Remove("r : 1")
		if !ok || err != nil {
			t.Fatalf("Remove = %v, %v; want true, nil", ok, err)
		}
		_, err = n.ActE(t.Context(), "r:1", nil)
		wantCode(t, err, runtime.CodeNotFound)
		if res, err := n.ActE(t.Context(), "r:1,s:2", nil); err != nil || res.Value() != "narrow" {
			t.Errorf("the narrower pattern after Remove = %v, %v", res.Value(), err)
		}
		if ok, err := n.Remove("r:1"); ok || err != nil {
			t.Errorf("second Remove = %v, %v; want false, nil", ok, err)
		}
		// Remove dropped the priors too: a plain Add works and has no prior.
		mustAdd(t, n, "r:1", func(ctx context.Context, r runtime.Request) (any, error) { return r.Prior(ctx, nil) })
		_, err = n.ActE(t.Context(), "r:1", nil)
		wantCode(t, err, runtime.CodeNotFound)
		var perr *pattern.ParseError
		if _, err := n.Remove("r:"); !errors.As(err, &perr) {
			t.Errorf("Remove of a bad pattern: err = %v, want a *ParseError", err)
		}
	})
}

func patternStringsOf(ps []introspect.PatternInfo) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Pattern.String()
	}
	return out
}
