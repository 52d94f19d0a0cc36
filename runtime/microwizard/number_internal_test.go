package microwizard

import (
	"testing"

	"github.com/wizardmesh/wizard/runtime/pattern"
)

// TestInexactInteger: the integers JavaScript would round are found
// outside strings, and nothing else is.
func TestInexactInteger(t *testing.T) {
	for _, tc := range []struct {
		in, want string
	}{
		{`{"a":9007199254740992,"b":-9007199254740992,"c":1152921504606846976}`, ""},
		{`{"a":9007199254740993}`, "9007199254740993"},
		{`[1,2,-9007199254740995]`, "-9007199254740995"},
		{`{"s":"9007199254740993","e":"\"9007199254740993\\"}`, ""},
		{`{"f":9007199254740993.5,"g":9007199254740993e0}`, ""},
		{`{"big":100000000000000000000001}`, "100000000000000000000001"},
		{`{"x":1e21,"y":1000000000000000000000}`, ""},
	} {
		got, _ := inexactInteger([]byte(tc.in))
		if got != tc.want {
			t.Errorf("inexactInteger(%s) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestRouteNumber: a number routes by its JavaScript string form once
// the node's pattern parser has read it.
func TestRouteNumber(t *testing.T) {
	for in, want := range map[string]string{"1e21": "1e+21", "1000000000000000000000": "1e+21", "1.0": "1", "100": "100", "1e-7": "1e-7", "0.000001": "0.000001", "-0": "0", "9007199254740993": "9007199254740992", "1e400": "Infinity"} {
		p, err := argsPattern([]byte(`{"v":`+in+`}`), nil)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := runtimeParse(p); err != nil || got != "v:"+want {
			t.Errorf("%s routes as %q (%v), want v:%s", in, got, err, want)
		}
	}
}

func runtimeParse(s string) (string, error) {
	p, err := pattern.Parse(s)
	return p.String(), err
}
