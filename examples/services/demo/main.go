// Command demo runs a small in-process wizard mesh: a few services added by
// pattern, and calls that show routing, precedence, overrides, typed clients
// and errors; then events that two groups subscribe to.
//
//	go run ./examples/services/demo
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/wizardmesh/wizard/runtime"
)

type sumRequest struct{ A, B float64 }
type sumResponse struct{ R float64 }

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run() error {
	node, err := runtime.New(runtime.WithMaxInFlight(1000))
	if err != nil {
		return err
	}
	defer node.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	var audit sync.WaitGroup
	services := []struct {
		pattern string
		h       runtime.Handler
	}{
		// A typed handler, as generated code registers them.
		{"role:math,cmd:sum", runtime.NewUnaryHandler(func(ctx context.Context, r *sumRequest) (*sumResponse, error) {
			return &sumResponse{R: r.A + r.B}, nil
		})},
		// A narrower pattern: integer:true refines role:math,cmd:sum.
		{"role:math,cmd:sum,integer:true", func(ctx context.Context, r runtime.Request) (any, error) {
			var in sumRequest
			if err := r.Decode(&in); err != nil {
				return nil, err
			}
			return &sumResponse{R: float64(int(in.A) + int(in.B))}, nil
		}},
		// Globs: any greeting in any language.
		{"role:greet,lang:*", func(ctx context.Context, r runtime.Request) (any, error) {
			return fmt.Sprintf("hello, %v (%v)", r.Get("name"), r.Get("lang")), nil
		}},
		{"role:greet,lang:fr", func(ctx context.Context, r runtime.Request) (any, error) {
			return fmt.Sprintf("bonjour, %v", r.Get("name")), nil
		}},
		// Fire and forget.
		{"role:audit,cmd:log", func(ctx context.Context, r runtime.Request) (any, error) {
			defer audit.Done()
			fmt.Printf("  [audit] %v\n", r.Get("event"))
			return nil, nil
		}},
		// A handler that fails with a code of its choosing.
		{"role:math,cmd:divide", func(ctx context.Context, r runtime.Request) (any, error) {
			var in sumRequest
			if err := r.Decode(&in); err != nil {
				return nil, err
			}
			if in.B == 0 {
				return nil, runtime.Errorf(runtime.CodeInvalidArgument, "division by zero")
			}
			return &sumResponse{R: in.A / in.B}, nil
		}},
	}
	for _, s := range services {
		if err := node.Add(s.pattern, s.h); err != nil {
			return err
		}
	}
	// Override: the new handler wraps the old one, reachable as its prior.
	if err := node.Add("role:math,cmd:sum", func(ctx context.Context, r runtime.Request) (any, error) {
		res, err := r.Prior(ctx, r.Msg())
		if err == nil {
			fmt.Printf("  [override] sum answered %v\n", res.(*sumResponse).R)
		}
		return res, err
	}, runtime.Override()); err != nil {
		return err
	}

	fmt.Println("patterns:")
	for _, p := range node.Patterns() {
		fmt.Println(" ", p.Pattern)
	}

	fmt.Println("calls:")
	sum, err := runtime.NewClient[sumRequest, sumResponse](node, "role:math,cmd:sum")
	if err != nil {
		return err
	}
	r, err := sum.Call(ctx, &sumRequest{A: 1, B: 2})
	if err != nil {
		return err
	}
	fmt.Printf("  client  role:math,cmd:sum {1 2}                    -> %v\n", r.R)

	res, err := node.Act(ctx, "role:math,cmd:sum", map[string]any{"A": 1.5, "B": 2, "integer": true})
	if err != nil {
		return err
	}
	fmt.Printf("  Act     role:math,cmd:sum {A:1.5 B:2 integer:true} -> %v\n", res.Value().(*sumResponse).R)

	for _, lang := range []string{"en", "fr"} {
		res, err = node.Act(ctx, "role:greet", map[string]any{"lang": lang, "name": "Ada"})
		if err != nil {
			return err
		}
		fmt.Printf("  Act     role:greet {lang:%s name:Ada}              -> %v\n", lang, res.Value())
	}

	res, err = node.ActE(ctx, "role:greet", map[string]any{"lang": "de", "name": "Grace"}, runtime.Mixin("lang"))
	if err != nil {
		return err
	}
	fmt.Printf("  ActE    role:greet +mixin lang {lang:de}           -> %v\n", res.Value())

	audit.Add(1)
	if _, err := node.ActE(ctx, "role:audit,cmd:log", map[string]any{"event": "demo ran"}, runtime.NoReply()); err != nil {
		return err
	}
	audit.Wait()

	_, err = node.Act(ctx, "role:math,cmd:divide", map[string]any{"A": 1, "B": 0})
	fmt.Printf("  Act     role:math,cmd:divide {B:0}                 -> code=%v err=%q\n", runtime.CodeOf(err), err)

	_, err = node.Act(ctx, "role:math,cmd:modulo", nil)
	fmt.Printf("  Act     role:math,cmd:modulo                       -> not found: %v (%v)\n", errors.Is(err, runtime.ErrNotFound), err)

	res, err = node.Act(ctx, "role:math,cmd:modulo", nil, runtime.Default("no modulo here"))
	if err != nil {
		return err
	}
	fmt.Printf("  Act     role:math,cmd:modulo Default               -> %v\n", res.Value())
	return events(ctx, node)
}

// events subscribes two groups to orders and emits one: each group runs
// it once; a wider subscription of billing's runs too.
func events(ctx context.Context, node *runtime.Node) error {
	fmt.Println("events:")
	for _, s := range []struct{ pattern, group string }{
		{"role:order,event:placed", "billing"},
		{"role:order,event:placed", "shipping"},
		{"role:order", "billing"},
	} {
		err := node.Subscribe(s.pattern, s.group, func(ctx context.Context, r runtime.Request) (any, error) {
			fmt.Printf("  [%s] %s got order %v\n", r.Group(), r.Pattern(), r.Get("id"))
			return nil, nil
		})
		if err != nil {
			return err
		}
	}
	d, err := node.Emit(ctx, "role:order,event:placed", map[string]any{"id": "o-42"})
	if err != nil {
		return err
	}
	fmt.Printf("  Emit    role:order,event:placed {id:o-42}          -> taken by %v\n", d.Took)
	_, err = node.Emit(ctx, "role:user,event:created", nil)
	fmt.Printf("  Emit    role:user,event:created                    -> %v\n", err)
	return nil
}
