package runtime_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/wizardmesh/wizard/runtime"
)

// TestConcurrency calls the node from many goroutines while others add,
// override and remove patterns. Every answer must come from the handler of
// the pattern asked for, or be NotFound; never another handler's. Run it
// with -race.
func TestConcurrency(t *testing.T) {
	n := newTestNode(t)
	const (
		services = 4
		callers  = 6
		rounds   = 300
		churn    = 150
	)
	// svc:fixed never changes.
	mustAdd(t, n, "svc:fixed", func(ctx context.Context, r runtime.Request) (any, error) { return "fixed", nil })
	handler := func(svc int, gen string) runtime.Handler {
		return func(ctx context.Context, r runtime.Request) (any, error) {
			return fmt.Sprintf("%d/%s", svc, gen), nil
		}
	}
	valid := func(svc int, v any) bool {
		s, ok := v.(string)
		return ok && (s == fmt.Sprintf("%d/add", svc) || s == fmt.Sprintf("%d/override", svc))
	}

	var wg sync.WaitGroup
	errc := make(chan error, callers*services+services)
	report := func(err error) {
		select {
		case errc <- err:
		default:
		}
	}
	for svc := range services {
		p := fmt.Sprintf("svc:%d,cmd:get", svc)
		wg.Go(func() {
			for i := range churn {
				if err := n.Add(p, handler(svc, "add")); err != nil && runtime.CodeOf(err) != runtime.CodeAlreadyExists {
					report(fmt.Errorf("Add(%q): %w", p, err))
					return
				}
				if i%2 == 0 {
					if err := n.Add(p, handler(svc, "override"), runtime.Override()); err != nil {
						report(fmt.Errorf("Add(%q, Override): %w", p, err))
						return
					}
				}
				if i%3 != 0 {
					if _, err := n.Remove(p); err != nil {
						report(fmt.Errorf("Remove(%q): %w", p, err))
						return
					}
				}
				// Unrelated patterns come and go too.
				q := fmt.Sprintf("other:%d,n:%d", svc, i)
				if err := n.Add(q, handler(-1, "other")); err != nil {
					report(fmt.Errorf("Add(%q): %w", q, err))
					return
				}
				if _, err := n.Remove(q); err != nil {
					report(fmt.Errorf("Remove(%q): %w", q, err))
					return
				}
			}
		})
	}
	for c := range callers {
		wg.Go(func() {
			ctx := context.Background()
			clients := make([]*runtime.Client[map[string]any, string], services)
			for svc := range services {
				clients[svc] = newClient[map[string]any, string](t, n, fmt.Sprintf("svc:%d,cmd:get", svc))
			}
			for i := range rounds {
				svc := (c + i) % services
				var v any
				var err error
				switch i % 4 {
				case 0:
					var res runtime.Result
					res, err = n.Act(ctx, fmt.Sprintf("svc:%d", svc), map[string]any{"cmd": "get"})
					v = res.Value()
				case 1:
					var res runtime.Result
					res, err = n.ActE(ctx, fmt.Sprintf("svc:%d,cmd:get", svc), nil)
					v = res.Value()
				case 2:
					var res runtime.Result
					res, err = n.ActE(ctx, fmt.Sprintf("svc:%d", svc), map[string]any{"cmd": "get"}, runtime.Mixin("cmd"))
					v = res.Value()
				case 3:
					var out *string
					out, err = clients[svc].Call(ctx, &map[string]any{})
					if out != nil {
						v = *out
					}
				}
				switch {
				case err != nil && runtime.CodeOf(err) != runtime.CodeNotFound:
					report(fmt.Errorf("call svc %d: unexpected error %w", svc, err))
					return
				case err == nil && !valid(svc, v):
					report(fmt.Errorf("call svc %d answered by %v", svc, v))
					return
				}
				if res, err := n.ActE(ctx, "svc:fixed", nil); err != nil || res.Value() != "fixed" {
					report(fmt.Errorf("svc:fixed = %v, %v", res.Value(), err))
					return
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
}
