package jsonscan

import (
	"encoding/json"
	"strings"
	"testing"
)

var validSeeds = []string{
	`{"name":"ada","n":1}`, ` {"a" : [1, 2.5e-3, -0, true, false, null, "x\u00e9\n"], "b": {}} `,
	`[]`, `{}`, `[[]]`, `[{}]`, `""`, `0`, `-0.0E+1`, `1e5`, `true`, `null`,
	``, ` `, `{`, `}`, `[`, `]`, `{"a"}`, `{"a":}`, `{"a":1,}`, `[1,]`, `[,1]`, `{,}`, `{"a":1 "b":2}`,
	`01`, `-`, `1.`, `.5`, `1e`, `1e+`, `+1`, `tru`, `nul`, `falsey`, `"\x"`, `"\u12"`, `"\u12g4"`,
	"\"\x01\"", "\"\xff\"", `"unterminated`, `[1] [2]`, `{"a":1}}`, `[[1]`, `{"a":[1}`, `[1}`, `{"a":1]`,
	"\t\n\r[1]\r\n", `"\/\b\f\r\t\\\""`, `{"":""}`, `[-1.5E-10,1E1,0.0]`,
}

// edgeSeeds are inputs at Valid's edges: a text that ends inside a
// member, an escape or a literal, a key that is not a string, \u with
// each hex digit's bounds and the characters beside them, an array after
// an object at the same depth, digits up to 9.
var edgeSeeds = []string{
	`{1}`, `{"a"`, `{"a" `, `{"a":`, `"abc\`, `"\u`, `"\u1`, `"\u123`, `"\u1234`, `"\u1234"`,
	`"\u09af"`, `"\uAF09"`, `"\u/000"`, `"\u:000"`, "\"\\u`000\"", `"\ug000"`, `"\u@000"`, `"\uG000"`,
	`t`, `f`, `n`, `[t`, `[f]`, `[nul]`, `[tru`, `[fals`, `[nul`, `[{},[1]]`, `{"a":{},"b":[1]}`, `[[],{}]`,
	`9`, `19`, `0.9`, `1e9`, `[-9]`, `1E+9`, `[1.]`, `[1e]`, `{"a":1.}`,
}

// TestValid: Valid agrees with encoding/json.Valid on the fuzz seeds and
// the edge cases, as a test of its own.
func TestValid(t *testing.T) {
	for _, s := range append(validSeeds, edgeSeeds...) {
		if got, want := Valid([]byte(s)), json.Valid([]byte(s)); got != want {
			t.Errorf("Valid(%q) = %v, json.Valid %v", s, got, want)
		}
	}
}

// FuzzValid: Valid agrees with encoding/json.Valid.
func FuzzValid(f *testing.F) {
	for _, s := range append(validSeeds, edgeSeeds...) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, d []byte) {
		if got, want := Valid(d), json.Valid(d); got != want {
			t.Errorf("Valid(%q) = %v, json.Valid %v", d, got, want)
		}
	})
}

// TestValidDepth: nesting up to encoding/json's bound is valid, one level
// more is not, as with json.Valid; past the stack's room on the
// goroutine's stack too.
func TestValidDepth(t *testing.T) {
	for _, n := range []int{1, 63, 64, 65, 128, 129, maxDepth - 1, maxDepth, maxDepth + 1} {
		for _, pair := range [][2]string{{"[", "]"}, {`{"a":`, "}"}} {
			d := []byte(strings.Repeat(pair[0], n) + "1" + strings.Repeat(pair[1], n))
			if got, want := Valid(d), json.Valid(d); got != want {
				t.Errorf("%d levels of %s: Valid %v, json.Valid %v", n, pair[0], got, want)
			}
		}
		mixed := []byte(strings.Repeat(`[{"a":`, n/2) + "1" + strings.Repeat("}]", n/2))
		if got, want := Valid(mixed), json.Valid(mixed); got != want {
			t.Errorf("%d mixed levels: Valid %v, json.Valid %v", n/2*2, got, want)
		}
	}
}

// TestValidAllocs: Valid allocates nothing for text nested 128 deep or
// less.
func TestValidAllocs(t *testing.T) {
	d := []byte(strings.Repeat("[", 128) + strings.Repeat("]", 128))
	if n := testing.AllocsPerRun(100, func() { Valid(d) }); n != 0 {
		t.Errorf("%v allocations", n)
	}
}

func BenchmarkValid(b *testing.B) {
	d := []byte(`{"name":"ada","n":1,"role":"bench","cmd":"echo"}`)
	b.Run("jsonscan", func(b *testing.B) {
		for b.Loop() {
			Valid(d)
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		for b.Loop() {
			json.Valid(d)
		}
	})
}
