package jsonscan

import (
	"encoding/json"
	"testing"
)

// FuzzValue: in valid JSON, Value from the first non-space byte ends
// where the value ends (only space follows), and in an array of it each
// element's end is where a ',' or the ']' comes.
func FuzzValue(f *testing.F) {
	for _, s := range []string{`1`, ` "a\"b" `, `{"a":[1,{"b":"]"}],"c":null}`, `[true, false]`, `-1.5e3`, `"\\"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, d []byte) {
		if !json.Valid(d) {
			return
		}
		end := Value(d, Space(d, 0))
		if Space(d, end) != len(d) {
			t.Fatalf("%q: the value ends at %d, then %q", d, end, d[end:])
		}
		if got := Trim(d); len(got) != end-Space(d, 0) {
			t.Fatalf("%q: Trim %q, want the value", d, got)
		}
		arr := append(append([]byte("["), d...), ",0]"...)
		if e := Value(arr, Space(arr, 1)); Space(arr, e) >= len(arr) || arr[Space(arr, e)] != ',' {
			t.Fatalf("%q as an array's element ends at %d", d, e)
		}
	})
}
