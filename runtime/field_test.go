package runtime_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/wizardmesh/wizard/runtime"
)

type namedInt int
type namedString string

// pair describes a getter's answer.
func pair[T any](v T, ok bool) string { return fmt.Sprintf("%v %v", v, ok) }

// TestRequest_TypedGetters: what Float64, Int64, String and Bool accept
// of each representation a field may have, at the edges of the ranges.
func TestRequest_TypedGetters(t *testing.T) {
	tests := []struct {
		v                   any
		f64, i64, str, bool string
	}{
		{1, "1 true", "1 true", "1 true", "false false"},
		{int8(-3), "-3 true", "-3 true", "-3 true", "false false"},
		{uint64(math.MaxUint64), "1.8446744073709552e+19 true", "0 false", "18446744073709551615 true", "false false"},
		{int64(math.MaxInt64), "9.223372036854776e+18 true", "9223372036854775807 true", "9223372036854775807 true", "false false"},
		{float64(1 << 63), "9.223372036854776e+18 true", "0 false", "9223372036854776000 true", "false false"},
		{-float64(1 << 63), "-9.223372036854776e+18 true", "-9223372036854775808 true", "-9223372036854776000 true", "false false"},
		{2.5, "2.5 true", "0 false", "2.5 true", "false false"},
		{float32(0.1), "0.1 true", "0 false", "0.1 true", "false false"},
		{json.Number("12"), "12 true", "12 true", "12 true", "false false"},
		{json.Number("1e2"), "100 true", "100 true", "100 true", "false false"},
		{"42", "42 true", "42 true", "42 true", "false false"},
		{"-0.5", "-0.5 true", "0 false", "-0.5 true", "false false"},
		{"007", "0 false", "0 false", "007 true", "false false"},
		{" 1", "0 false", "0 false", " 1 true", "false false"},
		{"NaN", "0 false", "0 false", "NaN true", "false false"},
		{"1e999", "0 false", "0 false", "1e999 true", "false false"},
		{"99999999999999999999", "1e+20 true", "0 false", "99999999999999999999 true", "false false"},
		{namedInt(5), "5 true", "5 true", "5 true", "false false"},
		{namedString("7"), "7 true", "7 true", "7 true", "false false"},
		{true, "0 false", "0 false", "true true", "true true"},
		{"false", "0 false", "0 false", "false true", "false true"},
		{nil, "0 false", "0 false", " false", "false false"},
		{map[string]any{"x": 1}, "0 false", "0 false", " false", "false false"},
		{[]any{1}, "0 false", "0 false", " false", "false false"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%T(%v)", tt.v, tt.v), func(t *testing.T) {
			n := newTestNode(t)
			var got [4]string
			mustAdd(t, n, "role:get", func(ctx context.Context, r runtime.Request) (any, error) {
				got[0] = pair(r.Float64("v"))
				got[1] = pair(r.Int64("v"))
				got[2] = pair(r.String("v"))
				got[3] = pair(r.Bool("v"))
				return nil, nil
			})
			if _, err := n.ActE(t.Context(), "role:get", map[string]any{"v": tt.v}); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([4]string{tt.f64, tt.i64, tt.str, tt.bool}, got); diff != "" {
				t.Errorf("Float64, Int64, String, Bool (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRequest_TypedGettersProto: protobuf fields through the getters, and
// Get leaving them as their protoreflect values.
func TestRequest_TypedGettersProto(t *testing.T) {
	n := newTestNode(t)
	var got []string
	mustAdd(t, n, "role:get", func(ctx context.Context, r runtime.Request) (any, error) {
		f, fok := r.Float64("number_value")
		s, sok := r.String("number_value")
		got = append(got, pair(f, fok)+" "+pair(s, sok), fmt.Sprintf("%T", r.Get("number_value")))
		return nil, nil
	})
	if _, err := n.ActE(t.Context(), "role:get", structpb.NewNumberValue(3)); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"3 true 3 true", "float64"}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestRequest_TypedGettersAllocate: the getters allocate nothing, where
// Get boxes a converted number.
func TestRequest_TypedGettersAllocate(t *testing.T) {
	n := newTestNode(t)
	var allocs float64
	mustAdd(t, n, "role:get", func(ctx context.Context, r runtime.Request) (any, error) {
		allocs = testing.AllocsPerRun(100, func() {
			_, _ = r.Float64("a")
			_, _ = r.Int64("a")
			_, _ = r.String("s")
			_, _ = r.Bool("t")
		})
		return nil, nil
	})
	if _, err := n.ActE(t.Context(), "role:get", map[string]any{"a": 12345, "s": "x", "t": true}); err != nil {
		t.Fatal(err)
	}
	if allocs != 0 {
		t.Errorf("the getters allocate %v times a run", allocs)
	}
}

// BenchmarkRequest_Read reads a Go int field of a map message in-process:
// through Get, which converts it to float64 (and boxes it), and through
// Float64, which allocates nothing.
func BenchmarkRequest_Read(b *testing.B) {
	for _, tt := range []struct {
		name string
		read func(r runtime.Request) float64
	}{
		{"Get", func(r runtime.Request) float64 { return r.Get("a").(float64) }},
		{"Float64", func(r runtime.Request) float64 { f, _ := r.Float64("a"); return f }},
	} {
		b.Run(tt.name, func(b *testing.B) {
			n := newTestNode(b)
			mustAdd(b, n, "role:get", func(ctx context.Context, r runtime.Request) (any, error) {
				b.ReportAllocs()
				for b.Loop() {
					if tt.read(r) != 12345 {
						b.Fatal("wrong value")
					}
				}
				return nil, nil
			})
			if _, err := n.ActE(b.Context(), "role:get", map[string]any{"a": 12345}); err != nil {
				b.Fatal(err)
			}
		})
	}
}
