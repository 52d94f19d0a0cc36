package doccheck

import (
	"os"
	"path/filepath"
	"testing"
)

func TestCheckExcerpt(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "m.yaml"), []byte("a: 1\nb:\n  c: 2  \n  d: 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := &Checker{Root: root}
	for _, tc := range []struct {
		name, directive, body string
		ok                    bool
	}{
		{"lines together", ": excerpt m.yaml", "b:\n  c: 2\n  d: 3\n", true},
		{"the whole file", ": excerpt m.yaml", "a: 1\nb:\n  c: 2\n  d: 3\n", true},
		{"lines apart", ": excerpt m.yaml", "a: 1\n  d: 3\n", false},
		{"a changed line", ": excerpt m.yaml", "  c: 4\n", false},
		{"no such file", ": excerpt n.yaml", "a: 1\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := Block{File: "x.md", Line: 1, Lang: "yaml", Body: tc.body, Directive: tc.directive}
			file, ok := b.excerpt()
			if !ok {
				t.Fatalf("directive %q is not an excerpt", tc.directive)
			}
			if err := c.CheckExcerpt(b, file); (err == nil) != tc.ok {
				t.Errorf("CheckExcerpt = %v, want ok %v", err, tc.ok)
			}
		})
	}
	if _, ok := (Block{Directive: ": skip reason"}).excerpt(); ok {
		t.Error("a skip directive is taken for an excerpt")
	}
}
