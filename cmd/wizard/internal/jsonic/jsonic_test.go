package jsonic

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParse(t *testing.T) {
	tests := []struct {
		in   string
		want any
	}{
		{"role:math,cmd:sum,a:1,b:2", map[string]any{"role": "math", "cmd": "sum", "a": json.Number("1"), "b": json.Number("2")}},
		{" a : 1 , b : x y ,", map[string]any{"a": json.Number("1"), "b": "x y"}},
		{"user:{name:ada,tags:[x,y,]},ok:true,no:false,none:null", map[string]any{"user": map[string]any{"name": "ada", "tags": []any{"x", "y"}}, "ok": true, "no": false, "none": nil}},
		{`{"role":"math","values":[1,2.5e3]}`, map[string]any{"role": "math", "values": []any{json.Number("1"), json.Number("2.5e3")}}},
		{`a:"x,y:\"z\"",'b c':'it\'s'`, map[string]any{"a": `x,y:"z"`, "b c": "it's"}},
		{"", map[string]any{}},
		{"[1,a]", []any{json.Number("1"), "a"}},
		{"42", json.Number("42")},
		{"a:01", map[string]any{"a": "01"}},
		{"a:{}", map[string]any{"a": map[string]any{}}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := Parse(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Parse(%q) (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		in     string
		offset int
		want   string
	}{
		{"a:1,b", 5, `at offset 5 (line 1, column 6): missing ':' after key "b" (found end of input)`},
		{"a:{b:1", 6, `at offset 6 (line 1, column 7): unterminated object: missing '}'`},
		{"a:[{b:1} 2]", 9, `at offset 9 (line 1, column 10): expected ',' or ']' after a list item, found '2'`},
		{"a:1,a:2", 4, `at offset 4 (line 1, column 5): duplicate key "a"`},
		{"a:http://x", 6, `at offset 6 (line 1, column 7): a bare value cannot hold ':': quote the value`},
		{"a:\n\"x", 3, `at offset 3 (line 2, column 1): unterminated quoted string`},
		{"a:,b:1", 2, `at offset 2 (line 1, column 3): missing value before ','`},
		{"{a:1}}", 5, `at offset 5 (line 1, column 6): unexpected '}' after the value`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			_, err := Parse(tt.in)
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("Parse(%q): %v, want a *SyntaxError", tt.in, err)
			}
			if se.Offset != tt.offset || se.Error() != tt.want {
				t.Errorf("Parse(%q):\n got %q (offset %d)\nwant %q (offset %d)", tt.in, se.Error(), se.Offset, tt.want, tt.offset)
			}
		})
	}
}

func TestCaret(t *testing.T) {
	_, err := Parse("a:1,b")
	var se *SyntaxError
	errors.As(err, &se)
	if got, want := se.Caret(), "a:1,b\n     ^"; got != want {
		t.Errorf("Caret:\n%s\nwant\n%s", got, want)
	}
}

// FuzzParse: any input parses or fails with a *SyntaxError whose offset
// is inside it; what parses encodes as JSON, and JSON parses back to
// the same value.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"role:math,cmd:sum,a:1", `{"a":[1,{"b":null}]}`, "a:'x\\'y'", "[", "a:{b:[c,d]}", "-0.5e+3", "a:\"\\u00e9\""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := Parse(s)
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) || se.Offset < 0 || se.Offset > len(s) {
				t.Fatalf("Parse(%q): %v", s, err)
			}
			_ = se.Caret()
			return
		}
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("Marshal(%#v): %v", v, err)
		}
		back, err := Parse(string(b))
		if err != nil {
			t.Fatalf("Parse(%s), the JSON of Parse(%q): %v", b, s, err)
		}
		if diff := cmp.Diff(v, back); diff != "" {
			t.Fatalf("Parse(%q) and its JSON %s differ:\n%s", s, b, diff)
		}
	})
}
