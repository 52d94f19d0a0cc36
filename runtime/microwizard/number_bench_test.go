package microwizard

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/wizardmesh/wizard/runtime"
)

// keysOf routes by the keys given, as a node whose patterns use them.
type keysOf map[string]bool

func (keysOf) ServeMessage(ctx context.Context, m *runtime.Message) *runtime.Message { return nil }
func (k keysOf) RoutesBy(key string) bool                                            { return k[key] }

// BenchmarkArgsPattern: the routing pattern of an act with a 1 MiB
// string, and of one with 1,000 number fields.
func BenchmarkArgsPattern(b *testing.B) {
	wide := map[string]any{"role": "go", "cmd": "size"}
	for i := range 1000 {
		wide["f"+strings.Repeat("x", i%7)+string(rune('a'+i%26))+strings.Repeat("y", i/26)] = i
	}
	for name, msg := range map[string]any{
		"1MiB":     map[string]any{"role": "go", "cmd": "size", "s": strings.Repeat("x", 1<<20)},
		"1000keys": wide,
	} {
		args, _ := json.Marshal(msg)
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(args)))
			for b.Loop() {
				if _, err := argsPattern(args, keysOf{"role": true, "cmd": true}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkInexactInteger: the check of a 1 MiB result for integers
// JavaScript would round.
func BenchmarkInexactInteger(b *testing.B) {
	nums := make([]int64, 1<<16)
	for i := range nums {
		nums[i] = int64(i) << 30
	}
	res, _ := json.Marshal(map[string]any{"s": strings.Repeat("x", 1<<19), "n": nums})
	b.ReportAllocs()
	b.SetBytes(int64(len(res)))
	for b.Loop() {
		if _, ok := inexactInteger(res); ok {
			b.Fatal("found one")
		}
	}
}
