package patrun

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/structpb"
)

func TestRouteValue(t *testing.T) {
	type named struct{ A int }
	type cmdName string
	type level int8
	type ratio float32
	type flag bool
	x := 1
	tests := []struct {
		name   string
		in     any
		want   string
		wantOK bool
	}{
		{"string", "get", "get", true},
		{"empty string", "", "", true},
		{"string not normalised", "1.0", "1.0", true},
		{"true", true, "true", true},
		{"false", false, "false", true},

		{"int", int(-5), "-5", true},
		{"int8", int8(math.MinInt8), "-128", true},
		{"int16", int16(math.MaxInt16), "32767", true},
		{"int32", int32(math.MinInt32), "-2147483648", true},
		{"int64", int64(math.MinInt64), "-9223372036854775808", true},
		{"uint", uint(7), "7", true},
		{"uint8", uint8(math.MaxUint8), "255", true},
		{"uint16", uint16(math.MaxUint16), "65535", true},
		{"uint32", uint32(math.MaxUint32), "4294967295", true},
		{"uint64", uint64(math.MaxUint64), "18446744073709551615", true},
		{"zero int", 0, "0", true},

		{"float64 whole", 1.0, "1", true},
		{"float64 fraction", 0.1, "0.1", true},
		{"float64 negative", -1.5, "-1.5", true},
		{"float64 1e21", 1e21, "1e+21", true},
		{"float64 1e20", 1e20, "100000000000000000000", true},
		{"float64 1e-7", 1e-7, "1e-7", true},
		{"float64 1e-6", 1e-6, "0.000001", true},
		{"float64 negative zero", math.Copysign(0, -1), "0", true},
		{"float64 NaN", math.NaN(), "NaN", true},
		{"float64 +Inf", math.Inf(1), "Infinity", true},
		{"float64 -Inf", math.Inf(-1), "-Infinity", true},
		{"float32 whole", float32(2), "2", true},
		{"float32 fraction", float32(0.1), "0.1", true},
		{"float32 1.1", float32(1.1), "1.1", true},
		{"float32 large", float32(3.4028235e38), "3.4028235e+38", true},
		{"float32 small", float32(1e-7), "1e-7", true},
		{"float32 negative zero", float32(math.Copysign(0, -1)), "0", true},
		{"float32 NaN", float32(math.NaN()), "NaN", true},
		{"float32 +Inf", float32(math.Inf(1)), "Infinity", true},

		{"json.Number int", json.Number("42"), "42", true},
		{"json.Number 1.0", json.Number("1.0"), "1", true},
		{"json.Number 1e3", json.Number("1e3"), "1000", true},
		{"json.Number -0", json.Number("-0"), "0", true},
		{"json.Number 1e21", json.Number("1E21"), "1e+21", true},

		{"named string", cmdName("get"), "get", true},
		{"named int", level(-3), "-3", true},
		{"named float32", ratio(0.1), "0.1", true},
		{"named bool", flag(true), "true", true},
		{"proto enum by name", structpb.NullValue_NULL_VALUE, "NULL_VALUE", true},

		{"nil", nil, "", false},
		{"map", map[string]any{"a": 1}, "", false},
		{"string map", map[string]string{"a": "1"}, "", false},
		{"slice", []any{1}, "", false},
		{"bytes", []byte("1"), "", false},
		{"struct", named{1}, "", false},
		{"pointer", &x, "", false},
		{"complex", complex(1, 0), "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := RouteValue(tt.in)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("RouteValue(%#v) (-want +got):\n%s", tt.in, diff)
			}
			if ok != tt.wantOK {
				t.Errorf("RouteValue(%#v) ok = %v, want %v", tt.in, ok, tt.wantOK)
			}
		})
	}
}

// TestRouteValue_SameAsPattern checks that a number routes as the value a
// pattern holds for it, whatever its Go type: 1 == 1.0 == "1".
func TestRouteValue_SameAsPattern(t *testing.T) {
	tests := []struct {
		pattern string
		values  []any
	}{
		{"a:1", []any{1, int8(1), uint64(1), 1.0, float32(1), json.Number("1"), json.Number("1.0"), "1"}},
		{"a:1.0", []any{1, 1.0, "1"}},
		{"a:-0", []any{0, math.Copysign(0, -1), 0.0, "0"}},
		{"a:1e3", []any{1000, 1e3, uint16(1000), "1000"}},
		{"a:1.5", []any{1.5, float32(1.5), json.Number("1.50"), "1.5"}},
		{"a:0.1", []any{0.1, float32(0.1), "0.1"}},
		{"a:1e21", []any{1e21, json.Number("1e21"), "1e+21"}},
		{"a:true", []any{true, "true"}},
		{"a:false", []any{false, "false"}},
	}
	for _, tt := range tests {
		t.Run(tt.pattern, func(t *testing.T) {
			want, _ := MustParse(tt.pattern).Get("a")
			for _, v := range tt.values {
				got, ok := RouteValue(v)
				if !ok || got != want {
					t.Errorf("RouteValue(%#v) = %q, %v; want %q", v, got, ok, want)
				}
			}
		})
	}
}

func TestFormatNumber(t *testing.T) {
	// Expected strings are what JavaScript's String(x) gives.
	tests := []struct {
		in   float64
		want string
	}{
		{0, "0"},
		{math.Copysign(0, -1), "0"},
		{1, "1"},
		{-1, "-1"},
		{100, "100"},
		{-1.5, "-1.5"},
		{0.1, "0.1"},
		{0.30000000000000004, "0.30000000000000004"},
		{1.0 / 3, "0.3333333333333333"},
		{4.35, "4.35"},
		{123456789.123, "123456789.123"},
		{9007199254740992, "9007199254740992"},
		{9007199254740993, "9007199254740992"},
		{1e20, "100000000000000000000"},
		{123456789012345680000, "123456789012345680000"},
		{1e21, "1e+21"},
		{-1e21, "-1e+21"},
		{1.2345e21, "1.2345e+21"},
		{1e100, "1e+100"},
		{1.7976931348623157e308, "1.7976931348623157e+308"},
		{-1.7976931348623157e308, "-1.7976931348623157e+308"},
		{0.000001, "0.000001"},
		{0.0000015, "0.0000015"},
		{0.000001234, "0.000001234"},
		{1e-7, "1e-7"},
		{1.5e-7, "1.5e-7"},
		{-1.5e-7, "-1.5e-7"},
		{1.23e-18, "1.23e-18"},
		{5e-324, "5e-324"},
		{-5e-324, "-5e-324"},
		{2.2250738585072014e-308, "2.2250738585072014e-308"},
		{math.NaN(), "NaN"},
		{math.Inf(1), "Infinity"},
		{math.Inf(-1), "-Infinity"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, FormatNumber(tt.in)); diff != "" {
				t.Errorf("FormatNumber(%v) (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

func TestNormalizeBare(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"0", "0"},
		{"1", "1"},
		{"-0", "0"},
		{"-0.0", "0"},
		{"0e0", "0"},
		{"1.0", "1"},
		{"1.50", "1.5"},
		{"1e3", "1000"},
		{"1E2", "100"},
		{"1.5e+2", "150"},
		{"15e-1", "1.5"},
		{"1e21", "1e+21"},
		{"1e400", "Infinity"},
		{"-1e400", "-Infinity"},
		{"1e-400", "0"},
		{"12345678901234567890", "12345678901234567890"}, // integers stay exact
		{"-12", "-12"},
		// Not JSON numbers: unchanged.
		{"007", "007"},
		{"00", "00"},
		{"-01", "-01"},
		{"01.5", "01.5"},
		{".5", ".5"},
		{"1.", "1."},
		{"1e", "1e"},
		{"1e+", "1e+"},
		{"1.e3", "1.e3"},
		{"+1", "+1"},
		{"-", "-"},
		{"--1", "--1"},
		{"0x10", "0x10"},
		{"1_000", "1_000"},
		{"NaN", "NaN"},
		{"Infinity", "Infinity"},
		{"1 ", "1 "},
		{"abc", "abc"},
		{"", ""},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got := normalizeBare(tt.in)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("normalizeBare(%q) (-want +got):\n%s", tt.in, diff)
			}
			if again := normalizeBare(got); again != got {
				t.Errorf("normalizeBare(%q) = %q, not a fixed point", got, again)
			}
		})
	}
}

func TestGlobMatch(t *testing.T) {
	tests := []struct {
		glob, s string
		want    bool
	}{
		{"", "", true},
		{"", "a", false},
		{"a", "", false},
		{"abc", "abc", true},
		{"abc", "abd", false},
		{"*", "", true},
		{"*", "anything at all", true},
		{"**", "", true},
		{"a*", "a", true},
		{"a*", "abc", true},
		{"a*", "ba", false},
		{"*a", "ba", true},
		{"*a", "ab", false},
		{"1*", "12", true},
		{"1*", "21", false},
		{"*2", "12", true},
		{"?", "", false},
		{"?", "a", true},
		{"?", "ab", false},
		{"??", "ab", true},
		{"x?", "x1", true},
		{"x?", "x", false},
		{"a?c", "abc", true},
		{"a?c", "ac", false},
		{"*?*", "", false},
		{"*?*", "x", true},
		{"*a*b*", "xaybz", true},
		{"*a*b*", "xbyaz", false},
		{"a*b*c", "abc", true},
		{"a*b*c", "aXbYc", true},
		{"a*b*c", "acb", false},
		{"a*ab", "aab", true},
		{"*ab", "aab", true},
		{"*x*", "abc", false},
		{"*a*a*a*b", "aaaaaaaaaaaaaaaaaaaaaaaa", false},
		{"*a*a*a*b", "aaaaaaaaaaaaaaaaaaaaaaab", true},
		{"a\\*", "a\\bc", true}, // no escapes: a backslash is a literal
		{"[ab]", "a", false},    // no character classes
		{"[ab]", "[ab]", true},
		// '?' is one character, not one byte.
		{"?", "é", true},
		{"??", "é", false},
		{"?", "日本", false},
		{"??", "日本", true},
		{"é*", "été", true},
		{"*é", "café", true},
		{"日*", "日本語", true},
		{"*本?", "日本語", true},
		{"?本*", "日本語", true},
		{"*語", "日本", false},
	}
	for _, tt := range tests {
		t.Run(tt.glob+"~"+tt.s, func(t *testing.T) {
			if got := GlobMatch(tt.glob, tt.s); got != tt.want {
				t.Errorf("GlobMatch(%q, %q) = %v, want %v", tt.glob, tt.s, got, tt.want)
			}
		})
	}
}
