package patrun

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParsePattern(t *testing.T) {
	tests := []struct {
		name  string
		in    string
		want  string // canonical String()
		pairs []Pair
	}{
		{"empty", "", "", nil},
		{"only spaces", " \t\r\n ", "", nil},
		{"one pair", "a:1", "a:1", []Pair{{"a", "1"}}},
		{"keys sorted", "role:math,cmd:sum", "cmd:sum,role:math", []Pair{{"cmd", "sum"}, {"role", "math"}}},
		{"byte order", "a:1,B:2,_:3,aa:4,A:5", "A:5,B:2,_:3,a:1,aa:4",
			[]Pair{{"A", "5"}, {"B", "2"}, {"_", "3"}, {"a", "1"}, {"aa", "4"}}},
		{"spaces around everything", " \tb : 2 ,\n a:1 \r\n", "a:1,b:2", []Pair{{"a", "1"}, {"b", "2"}}},
		{"no spaces", "a:x,b:y", "a:x,b:y", []Pair{{"a", "x"}, {"b", "y"}}},
		{"space inside value kept", "a: hello  world ,b:1", "a:hello  world,b:1",
			[]Pair{{"a", "hello  world"}, {"b", "1"}}},
		{"unicode", "ключ:значение,日本:語", "ключ:значение,日本:語",
			[]Pair{{"ключ", "значение"}, {"日本", "語"}}},
		{"dollar inside key kept", "$a:1,a$b:2", "$a:1,a$b:2", []Pair{{"$a", "1"}, {"a$b", "2"}}},

		// Quoted values.
		{"quoted comma and colon", `a:"x,y:z"`, `a:"x,y:z"`, []Pair{{"a", "x,y:z"}}},
		{"quoted escapes", `a:"say \"hi\" \\o/"`, `a:"say \"hi\" \\o/"`, []Pair{{"a", `say "hi" \o/`}}},
		{"quoted surrounding spaces", `a:" x "`, `a:" x "`, []Pair{{"a", " x "}}},
		{"quoted empty", `a:""`, `a:""`, []Pair{{"a", ""}}},
		{"quoted plain", `a:"x"`, "a:x", []Pair{{"a", "x"}}},
		{"quoted number is not normalised", `a:"1.0"`, `a:"1.0"`, []Pair{{"a", "1.0"}}},
		{"quoted integer", `a:"1"`, "a:1", []Pair{{"a", "1"}}},
		{"quoted null is a value", `a:"null"`, `a:"null"`, []Pair{{"a", "null"}}},
		{"quoted then more", ` a : "x" , b:2`, "a:x,b:2", []Pair{{"a", "x"}, {"b", "2"}}},
		{"backslash in bare value", `a:x\y`, `a:"x\\y"`, []Pair{{"a", `x\y`}}},

		// Numbers take their JavaScript form.
		{"1.0", "a:1.0", "a:1", []Pair{{"a", "1"}}},
		{"1.50", "a:1.50", "a:1.5", []Pair{{"a", "1.5"}}},
		{"1e3", "a:1e3", "a:1000", []Pair{{"a", "1000"}}},
		{"1E+2", "a:1E+2", "a:100", []Pair{{"a", "100"}}},
		{"007 stays", "a:007", "a:007", []Pair{{"a", "007"}}},
		{"-0", "a:-0", "a:0", []Pair{{"a", "0"}}},
		{"-0.0", "a:-0.0", "a:0", []Pair{{"a", "0"}}},
		{"-1.5", "a:-1.5", "a:-1.5", []Pair{{"a", "-1.5"}}},
		{"1e21", "a:1e21", "a:1e+21", []Pair{{"a", "1e+21"}}},
		{"1e-7", "a:0.0000001", "a:1e-7", []Pair{{"a", "1e-7"}}},
		{"big integer verbatim", "a:12345678901234567890", "a:12345678901234567890", []Pair{{"a", "12345678901234567890"}}},
		{"not a number: leading dot", "a:.5", "a:.5", []Pair{{"a", ".5"}}},
		{"not a number: trailing dot", "a:1.", "a:1.", []Pair{{"a", "1."}}},
		{"not a number: plus", "a:+1", "a:+1", []Pair{{"a", "+1"}}},
		{"not a number: hex", "a:0x10", "a:0x10", []Pair{{"a", "0x10"}}},
		{"not a number: dash word", "a:-x", "a:-x", []Pair{{"a", "-x"}}},
		{"booleans are words", "a:true,b:false", "a:true,b:false", []Pair{{"a", "true"}, {"b", "false"}}},

		// Dropped keys.
		{"null drops", "a:null,b:1", "b:1", []Pair{{"b", "1"}}},
		{"null with spaces drops", "a: null ,b:1", "b:1", []Pair{{"b", "1"}}},
		{"only null", "a:null", "", nil},
		{"meta key drops", "a$:1,b:2", "b:2", []Pair{{"b", "2"}}},
		{"quoted meta key value drops", `x$:"q,r"`, "", nil},

		// Globs are values like any other.
		{"globs", "cmd:*,role:x?", "cmd:*,role:x?", []Pair{{"cmd", "*"}, {"role", "x?"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Parse(tt.in)
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.in, err)
			}
			if diff := cmp.Diff(tt.want, p.String()); diff != "" {
				t.Errorf("String (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.pairs, p.Pairs()); diff != "" {
				t.Errorf("Pairs (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(len(tt.pairs), p.Len()); diff != "" {
				t.Errorf("Len (-want +got):\n%s", diff)
			}
			// The canonical form parses back to the same pattern.
			q, err := Parse(p.String())
			if err != nil {
				t.Fatalf("Parse(%q) (canonical): %v", p.String(), err)
			}
			if !q.Equal(p) {
				t.Errorf("canonical %q parses to %q", p.String(), q.String())
			}
		})
	}
}

func TestParsePattern_Errors(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		pos    int
		reason string // a substring of Reason
	}{
		{"empty key", ":1", 0, "empty key"},
		{"empty key after space", " :1", 1, "empty key"},
		{"empty key in second pair", "a:1, :2", 5, "empty key"},
		{"empty pair at start", ",a:1", 0, "empty pair"},
		{"empty pair in middle", "a:1,,b:2", 4, "empty pair"},
		{"missing colon", "a", 1, "missing ':'"},
		{"missing colon before comma", "a,b:1", 1, "missing ':'"},
		{"missing colon at end", "a:1,b", 5, "missing ':'"},
		{"missing colon after spaces", "a:1, b  ", 8, "missing ':'"},
		{"space inside key", "a b:1", 2, "holds a space or quote"},
		{"quote inside key", `a"b":1`, 1, "holds a space or quote"},
		{"missing value at end", "a:", 2, "missing value"},
		{"missing value before comma", "a:,b:1", 2, "missing value"},
		{"missing value, spaces", "a: ,b:1", 3, "missing value"},
		{"missing value, trailing spaces", "a:  ", 4, "missing value"},
		{"duplicate key", "a:1,a:2", 4, "duplicate key"},
		{"duplicate key with spaces", "a:1, b:2 ,a:3", 10, "duplicate key"},
		{"duplicate of a null key", "a:null,a:1", 7, "duplicate key"},
		{"duplicate meta key", "a$:1,a$:2", 5, "duplicate key"},
		{"duplicate quoted", `a:"x",a:"y"`, 6, "duplicate key"},
		{"unterminated quote", `a:"xy`, 2, "unterminated"},
		{"unterminated after escape", `a:"x\"`, 2, "unterminated"},
		{"unterminated in second pair", `a:1,b:"x,c:2`, 6, "unterminated"},
		{"bad escape", `a:"x\n"`, 4, "bad escape"},
		{"backslash at end", `a:"x\`, 4, "bad escape"},
		{"trailing comma", "a:1,", 4, "empty pair"},
		{"trailing comma and spaces", "a:1 , ", 6, "empty pair"},
		{"trailing comma after null", "a:null,", 7, "empty pair"},
		{"trailing comma after meta key", "a$:1,", 5, "empty pair"},
		{"lone comma", ",", 0, "empty pair"},
		{"unquoted colon", "a:b:c", 3, "quote the value"},
		{"unquoted colon, two pairs", "a:1 b:2", 5, "quote the value"},
		{"unquoted quote", `a:b"c"`, 3, "quote the value"},
		{"quoted key", `"a":1`, 0, "cannot be quoted"},
		{"quoted second key", `a:1, "b":2`, 5, "cannot be quoted"},
		{"text after quoted value", `a:"x"y`, 5, "expected ','"},
		{"two quoted values", `a:"x" "y"`, 6, "expected ','"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Parse(tt.in)
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("Parse(%q) = %q, %v; want a *ParseError", tt.in, p, err)
			}
			if diff := cmp.Diff(tt.in, pe.Pattern); diff != "" {
				t.Errorf("Pattern (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.pos, pe.Pos); diff != "" {
				t.Errorf("Pos (-want +got):\n%s\nerror: %v", diff, err)
			}
			if !strings.Contains(pe.Reason, tt.reason) {
				t.Errorf("Reason = %q, want it to hold %q", pe.Reason, tt.reason)
			}
			if msg := err.Error(); !strings.HasPrefix(msg, "wizard: bad pattern ") || !strings.Contains(msg, pe.Reason) {
				t.Errorf("Error() = %q, want the wizard prefix and the reason", msg)
			}
			if p.Len() != 0 || p.String() != "" {
				t.Errorf("pattern on error = %q, want the zero pattern", p)
			}
		})
	}
}

func TestMustParsePattern(t *testing.T) {
	t.Run("valid", func(t *testing.T) {
		if diff := cmp.Diff("a:1,b:2", MustParse("b:2,a:1").String()); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
	t.Run("invalid panics with the parse error", func(t *testing.T) {
		defer func() {
			r := recover()
			var pe *ParseError
			if err, ok := r.(error); !ok || !errors.As(err, &pe) {
				t.Errorf("recovered %v, want a *ParseError", r)
			}
		}()
		MustParse("a:1,a:2")
		t.Error("MustParse did not panic")
	})
}

func TestPatternOfPairs(t *testing.T) {
	tests := []struct {
		name    string
		pairs   []Pair
		want    string
		wantErr string
	}{
		{"none", nil, "", ""},
		{"sorted", []Pair{{"role", "math"}, {"cmd", "sum"}}, "cmd:sum,role:math", ""},
		{"values verbatim", []Pair{{"a", "1.0"}}, `a:"1.0"`, ""},
		{"integer needs no quotes", []Pair{{"a", "1"}}, "a:1", ""},
		{"null string", []Pair{{"a", "null"}}, `a:"null"`, ""},
		{"empty value", []Pair{{"a", ""}}, `a:""`, ""},
		{"spaces", []Pair{{"a", " x"}, {"b", "y\t"}}, "a:\" x\",b:\"y\t\"", ""},
		{"separators", []Pair{{"a", `x,y:"z"`}}, `a:"x,y:\"z\""`, ""},
		{"backslash", []Pair{{"a", `x\y`}}, `a:"x\\y"`, ""},
		{"007", []Pair{{"a", "007"}}, "a:007", ""},
		{"glob", []Pair{{"a", "1*"}}, "a:1*", ""},
		{"meta key dropped", []Pair{{"a$", "1"}, {"b", "2"}}, "b:2", ""},
		{"empty key", []Pair{{"", "1"}}, "", "bad pattern key"},
		{"key with colon", []Pair{{"a:b", "1"}}, "", "bad pattern key"},
		{"key with comma", []Pair{{"a,b", "1"}}, "", "bad pattern key"},
		{"key with space", []Pair{{"a b", "1"}}, "", "bad pattern key"},
		{"key with quote", []Pair{{`a"`, "1"}}, "", "bad pattern key"},
		{"duplicate key", []Pair{{"a", "1"}, {"a", "1"}}, "", "duplicate pattern key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := patternOf(tt.pairs...)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("patternOf = %q, %v; want an error holding %q", p, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("patternOf: %v", err)
			}
			if diff := cmp.Diff(tt.want, p.String()); diff != "" {
				t.Errorf("String (-want +got):\n%s", diff)
			}
			// The canonical form parses back to the same pairs.
			q, err := Parse(p.String())
			if err != nil {
				t.Fatalf("Parse(%q): %v", p.String(), err)
			}
			if diff := cmp.Diff(p.Pairs(), q.Pairs()); diff != "" {
				t.Errorf("round trip Pairs (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("does not keep the caller's slice", func(t *testing.T) {
		in := []Pair{{"b", "2"}, {"a", "1"}}
		p, err := patternOf(in...)
		if err != nil {
			t.Fatal(err)
		}
		in[0].Value = "changed"
		if diff := cmp.Diff("a:1,b:2", p.String()); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]Pair{{"b", "changed"}, {"a", "1"}}, in); diff != "" {
			t.Errorf("input reordered (-want +got):\n%s", diff)
		}
	})
}

func TestPattern_Pairs_Copy(t *testing.T) {
	p := MustParse("a:1,b:2")
	ps := p.Pairs()
	ps[0].Value = "changed"
	if diff := cmp.Diff([]Pair{{"a", "1"}, {"b", "2"}}, p.Pairs()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestPattern_With(t *testing.T) {
	tests := []struct {
		name string
		p, q string
		want string
	}{
		{"disjoint", "a:1", "b:2", "a:1,b:2"},
		{"q wins", "a:1,b:2", "b:3,c:4", "a:1,b:3,c:4"},
		{"empty q", "a:1", "", "a:1"},
		{"empty p", "", "a:1", "a:1"},
		{"both empty", "", "", ""},
		{"same", "a:1", "a:1", "a:1"},
		{"globs", "role:x", "cmd:*", "cmd:*,role:x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, q := MustParse(tt.p), MustParse(tt.q)
			got := p.With(q)
			if diff := cmp.Diff(tt.want, got.String()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(MustParse(tt.want).Pairs(), got.Pairs()); diff != "" {
				t.Errorf("Pairs (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.p, p.String()); diff != "" {
				t.Errorf("p changed (-want +got):\n%s", diff)
			}
			if got.HasGlob() != MustParse(tt.want).HasGlob() {
				t.Errorf("HasGlob = %v", got.HasGlob())
			}
		})
	}
}

func TestPattern_Get(t *testing.T) {
	p := MustParse(`role:math, cmd:sum, n:1.0, s:"x,y"`)
	tests := []struct {
		name   string
		p      Pattern
		key    string
		want   string
		wantOK bool
	}{
		{"first", p, "cmd", "sum", true},
		{"last", p, "s", "x,y", true},
		{"normalised", p, "n", "1", true},
		{"absent", p, "zzz", "", false},
		{"prefix of a key", p, "ro", "", false},
		{"zero pattern", Pattern{}, "a", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := tt.p.Get(tt.key)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("value (-want +got):\n%s", diff)
			}
			if ok != tt.wantOK {
				t.Errorf("ok = %v, want %v", ok, tt.wantOK)
			}
		})
	}
}

func TestPattern_Equal(t *testing.T) {
	tests := []struct {
		name string
		p, q Pattern
		want bool
	}{
		{"same text", MustParse("a:1,b:2"), MustParse("a:1,b:2"), true},
		{"order and spaces", MustParse("a:1,b:2"), MustParse(" b : 2 , a : 1 "), true},
		{"number forms", MustParse("a:1"), MustParse("a:1.0"), true},
		{"quoted and bare", MustParse("a:x"), MustParse(`a:"x"`), true},
		{"quoted number differs", MustParse("a:1.0"), MustParse(`a:"1.0"`), false},
		{"meta keys ignored", MustParse("a:1"), MustParse("a:1,b$:2"), true},
		{"null ignored", MustParse("a:1"), MustParse("a:1,b:null"), true},
		{"subset", MustParse("a:1"), MustParse("a:1,b:2"), false},
		{"other value", MustParse("a:1"), MustParse("a:2"), false},
		{"zero and empty", Pattern{}, MustParse(""), true},
		{"zero and non-empty", Pattern{}, MustParse("a:1"), false},
		{"from pairs", MustParse("a:1,b:2"), mustPatternOf(t, Pair{"b", "2"}, Pair{"a", "1"}), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.p.Equal(tt.q); got != tt.want {
				t.Errorf("%q.Equal(%q) = %v, want %v", tt.p, tt.q, got, tt.want)
			}
			if got := tt.q.Equal(tt.p); got != tt.want {
				t.Errorf("%q.Equal(%q) = %v, want %v", tt.q, tt.p, got, tt.want)
			}
		})
	}
}

func mustPatternOf(t testing.TB, pairs ...Pair) Pattern {
	t.Helper()
	p, err := patternOf(pairs...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPattern_HasGlob(t *testing.T) {
	tests := []struct {
		name string
		p    Pattern
		want bool
	}{
		{"star", MustParse("a:*"), true},
		{"question mark", MustParse("a:x?"), true},
		{"quoted glob", MustParse(`a:"x*"`), true},
		{"one of many", MustParse("a:1,b:2*,c:3"), true},
		{"none", MustParse("a:1,b:2"), false},
		{"glob char in key only", mustPatternOf(t, Pair{"a*", "1"}), false},
		{"empty", MustParse(""), false},
		{"zero", Pattern{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.p.HasGlob(); got != tt.want {
				t.Errorf("%q.HasGlob() = %v, want %v", tt.p, got, tt.want)
			}
		})
	}
}

func TestPattern_Zero(t *testing.T) {
	type summary struct {
		String string
		Len    int
		Pairs  []Pair
		Glob   bool
	}
	var p Pattern
	got := summary{p.String(), p.Len(), p.Pairs(), p.HasGlob()}
	want := summary{"", 0, nil, false}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func FuzzParsePattern(f *testing.F) {
	for _, s := range []string{
		"",
		"a:1",
		"role:math,cmd:sum",
		" b : 2 ,\ta:1\n",
		`a:"x,y:z"`,
		`a:"say \"hi\" \\o/"`,
		`a:" x "`,
		`a:""`,
		"a:1.0,b:1e3,c:007,d:-0,e:1e21,f:0.0000001",
		"a:null,b$:1,c:2",
		"cmd:*,role:x?",
		"a:1,",
		":1",
		"a:1,a:2",
		`a:"xy`,
		`a:"x\n"`,
		"a:b:c",
		`"a":1`,
		`a:x\y`,
		"ключ:значение",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := Parse(s)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("Parse(%q): %v is not a *ParseError", s, err)
			}
			if pe.Pattern != s || pe.Pos < 0 || pe.Pos > len(s) || pe.Reason == "" {
				t.Fatalf("Parse(%q): bad error %#v", s, pe)
			}
			return
		}
		pairs := p.Pairs()
		for i, pr := range pairs {
			if pr.Key == "" || IsMetaKey(pr.Key) || i > 0 && pairs[i-1].Key >= pr.Key {
				t.Fatalf("Parse(%q): bad pairs %q", s, pairs)
			}
		}
		if p.HasGlob() != slices.ContainsFunc(pairs, func(pr Pair) bool { return IsGlob(pr.Value) }) {
			t.Fatalf("Parse(%q): HasGlob = %v for %q", s, p.HasGlob(), pairs)
		}
		q, err := Parse(p.String())
		if err != nil {
			t.Fatalf("Parse(%q) = %q, whose canonical form does not parse: %v", s, p, err)
		}
		if !q.Equal(p) {
			t.Fatalf("Parse(%q) = %q, which parses back to %q", s, p, q)
		}
		if diff := cmp.Diff(pairs, q.Pairs()); diff != "" {
			t.Fatalf("Parse(%q): round trip Pairs (-want +got):\n%s", s, diff)
		}
		r, err := patternOf(pairs...)
		if err != nil {
			t.Fatalf("patternOf(%q): %v", pairs, err)
		}
		if diff := cmp.Diff(p.String(), r.String()); diff != "" {
			t.Fatalf("patternOf(Pairs()) (-want +got):\n%s", diff)
		}
	})
}
