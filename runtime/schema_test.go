package runtime_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testpb"
	"github.com/wizardmesh/wizard/runtime/tcp"
)

// TestDescribe: a node serves the schema of its typed patterns on
// DescribePattern; a caller finds it by pattern, builds the method's
// descriptor from it, and a second pull is confirmed by digest. An
// untyped node answers an empty schema.
func TestDescribe(t *testing.T) {
	tr, err := tcp.New()
	if err != nil {
		t.Fatal(err)
	}
	srv := newTestNode(t, runtime.WithTransport(tr), runtime.WithListen("127.0.0.1:0"))
	if err := testpb.RegisterMathServiceHandler(srv, &sumHandler{}); err != nil {
		t.Fatal(err)
	}
	plain := newTestNode(t, runtime.WithTransport(tr), runtime.WithListen("127.0.0.1:0"))
	if err := plain.Add("role:plain", func(context.Context, runtime.Request) (any, error) { return nil, nil }); err != nil {
		t.Fatal(err)
	}
	cl := newTestNode(t, runtime.WithTransport(tr), runtime.WithDiscovery(runtime.StaticPeers(srv.Addr(), plain.Addr())))
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var pattern string
	for _, p := range srv.Patterns() {
		pattern = p.Pattern.String()
	}
	for _, p := range []string{pattern, "role:plain"} {
		if err := cl.WaitFor(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 { // the second is confirmed by digest
		s, err := cl.Describe(ctx, pattern)
		if err != nil {
			t.Fatal(err)
		}
		if s.ID != srv.ID() {
			t.Errorf("ID %q, want %q", s.ID, srv.ID())
		}
		md, err := s.Method(pattern)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := string(md.Input().FullName()), "wizard.testkit.v1.SumRequest"; got != want {
			t.Errorf("input %s, want %s", got, want)
		}
	}
	own, err := srv.Describe(ctx, pattern)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(srv.ID(), own.ID); diff != "" || len(own.Methods) == 0 {
		t.Errorf("own schema %v", own.Methods)
	}
	s, err := cl.Describe(ctx, "role:plain")
	if err != nil {
		t.Fatal(err)
	}
	if s.Files != nil || len(s.Methods) != 0 || s.ID != plain.ID() {
		t.Errorf("untyped node's schema: %+v, want none", s)
	}
	if _, err := s.Method("role:plain"); runtime.CodeOf(err) != runtime.CodeNotFound {
		t.Errorf("Method of an untyped pattern: %v, want not_found", err)
	}
	if _, err := cl.Describe(ctx, "role:nobody"); runtime.CodeOf(err) != runtime.CodeNotFound {
		t.Errorf("Describe of a pattern nobody serves: %v, want not_found", err)
	}
}
