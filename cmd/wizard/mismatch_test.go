package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	mathv1 "github.com/wizardmesh/wizard/examples/gen/math/v1"
	"github.com/wizardmesh/wizard/examples/services/mathsvc"
	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/tcp"
)

// TestTypeMismatch: when the targets of a pattern serve it with different
// message types, act fails naming both (never prints an answer of one
// type read as another), and explain and patterns say they differ.
func TestTypeMismatch(t *testing.T) {
	methods := mathv1.File_wizard_examples_math_v1_math_proto.Services().ByName("MathService").Methods()
	sum := &mathsvc.Service{}
	var addrs []string
	for i, add := range []func(*runtime.Node) error{
		func(n *runtime.Node) error { // SumRequest -> SumResponse
			return n.Add(mathv1.MathServiceSumPattern, runtime.NewUnaryHandler(sum.Sum), runtime.Method(methods.ByName("Sum")))
		},
		func(n *runtime.Node) error { // the same pattern, ProductRequest -> ProductResponse
			return n.Add(mathv1.MathServiceSumPattern, runtime.NewUnaryHandler(sum.Product), runtime.Method(methods.ByName("Product")))
		},
	} {
		tr, err := tcp.New()
		if err != nil {
			t.Fatal(err)
		}
		n, err := runtime.New(runtime.WithID([]string{"node-sum", "node-product"}[i]), runtime.WithTransport(tr), runtime.WithListen("127.0.0.1:0"), runtime.WithLogger(quiet))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			n.Shutdown(ctx)
		})
		if err := add(n); err != nil {
			t.Fatal(err)
		}
		addrs = append(addrs, n.Addr())
	}
	peers := []string{"--peers", strings.Join(addrs, ","), "--timeout", "10s"}
	const sumT, productT = "wizard.examples.math.v1.SumRequest", "wizard.examples.math.v1.ProductRequest"

	for range 4 { // the balancer would pick either target
		r := wizard(t, "", append([]string{"act"}, append(peers, "cmd:sum,role:math", "values:[2,3]")...)...)
		if r.code != 64+9 || r.out != "" || !strings.Contains(r.err, sumT) || !strings.Contains(r.err, productT) {
			t.Fatalf("act: exit %d, stdout %q, stderr %s; want exit 73 (failed_precondition) naming %s and %s", r.code, r.out, r.err, sumT, productT)
		}
	}

	r := wizard(t, "", append([]string{"explain"}, append(peers, "cmd:sum,role:math")...)...)
	if r.code != 0 || !strings.Contains(r.out, "types       differ by target") || !strings.Contains(r.out, sumT) || !strings.Contains(r.out, productT) {
		t.Errorf("explain: exit %d:\n%s%s\nwant the types of each target", r.code, r.out, r.err)
	}
	r = wizard(t, "", append([]string{"patterns"}, peers...)...)
	if r.code != 0 || !strings.Contains(r.out, "types differ") || !strings.Contains(r.out, sumT) || !strings.Contains(r.out, productT) {
		t.Errorf("patterns: exit %d:\n%s%s\nwant the types of each target", r.code, r.out, r.err)
	}
	r = wizard(t, "", append([]string{"patterns", "--output", "json"}, peers...)...)
	var ps []patternJSON
	if err := json.Unmarshal([]byte(r.out), &ps); err != nil || len(ps) != 1 {
		t.Fatalf("patterns JSON %s (%v)", r.out, err)
	}
	if b, _ := json.Marshal(ps[0]); !strings.Contains(string(b), `"types_differ"`) {
		t.Errorf("patterns JSON %s: want types_differ", b)
	}
}
