package main

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/wizardmesh/wizard/runtime/pattern"
)

var metaKeyCases = []struct {
	name, pattern string
	want          []string
}{
	{"none", "role:math,cmd:sum", nil},
	{"empty", "", nil},
	{"one", "cmd:get,trace$:1", []string{"trace$"}},
	{"first", "trace$:1,cmd:get", []string{"trace$"}},
	{"only", "a$:1", []string{"a$"}},
	{"spaces", " cmd : get , trace$ : 1 ", []string{"trace$"}},
	{"tabs and newlines", "cmd:get,\n\ttrace$\t:\t1\n", []string{"trace$"}},
	{"several", "a$:1,b:2,c$:3", []string{"a$", "c$"}},
	{"quoted value holds a meta key", `note:"x$:1,y$:2",cmd:get`, nil},
	{"quoted value with escapes", `note:"a\"b$:1\\",c$:2`, []string{"c$"}},
	{"quoted meta value", `note$:"a,b:c",user$:x`, []string{"note$", "user$"}},
	{"dollar inside key is kept", "$a:1,a$b:2", nil},
	{"dollar in value", "cost:$5", nil},
	{"null value", "a:null,b$:2", []string{"b$"}},
	{"glob", "cmd:*,x$:1", []string{"x$"}},
}

func TestMetaKeys(t *testing.T) {
	for _, c := range metaKeyCases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := pattern.Parse(c.pattern); err != nil {
				t.Fatalf("the case does not parse: %v", err)
			}
			if diff := cmp.Diff(c.want, metaKeys(c.pattern)); diff != "" {
				t.Errorf("metaKeys(%q) (-want +got):\n%s", c.pattern, diff)
			}
		})
	}
}

// FuzzMetaKeys checks metaKeys against the runtime's parser: every key it
// returns ends in '$' and is a key of the pattern (adding it again is a
// duplicate), and a pattern of which it finds none drops nothing a '$' key
// could explain (parsing it with "x$" renamed keeps as many pairs).
func FuzzMetaKeys(f *testing.F) {
	for _, c := range metaKeyCases {
		f.Add(c.pattern)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := pattern.Parse(s)
		if err != nil {
			return
		}
		keys := metaKeys(s)
		for _, k := range keys {
			if !strings.HasSuffix(k, "$") {
				t.Fatalf("metaKeys(%q) returned %q", s, k)
			}
			_, err := pattern.Parse(s + "," + k + ":1")
			if err == nil || !strings.Contains(err.Error(), "duplicate key") {
				t.Fatalf("metaKeys(%q) returned %q, which is not a key of it: adding it gives %v", s, k, err)
			}
		}
		if len(keys) == 0 && strings.Contains(s, "$") {
			// Every '$' that ends a key becomes "$_": if that kept more
			// pairs, metaKeys missed a key.
			renamed := strings.NewReplacer("$:", "$_:", "$ ", "$_ ", "$\t", "$_\t", "$\n", "$_\n", "$\r", "$_\r").Replace(s)
			q, err := pattern.Parse(renamed)
			if err == nil && q.Len() > p.Len() && !strings.Contains(s, `"`) {
				t.Fatalf("metaKeys(%q) found no '$' key, but %q keeps %d pairs to its %d", s, renamed, q.Len(), p.Len())
			}
		}
	})
}
