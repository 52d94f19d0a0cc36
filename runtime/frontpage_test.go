package runtime_test

import (
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"slices"
	"strings"
	"testing"
)

// maxFrontPage bounds the exported top-level identifiers of package
// runtime: the types, functions, constants and variables that go doc
// lists on its front page. A service author's API lives here; what most
// of them never touch has a package of its own (runtime/pattern,
// runtime/discovery, runtime/introspect).
const maxFrontPage = 150

// TestFrontPage fails when package runtime exports more than
// maxFrontPage top-level identifiers, naming them by file.
func TestFrontPage(t *testing.T) {
	bp, err := build.ImportDir(".", 0) // the files this build compiles
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var names []string
	for _, file := range bp.GoFiles {
		f, err := parser.ParseFile(fset, file, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			for _, name := range exportedTopLevel(d) {
				names = append(names, file+": "+name)
			}
		}
	}
	if len(names) > maxFrontPage {
		slices.Sort(names)
		t.Errorf("package runtime exports %d top-level identifiers, more than %d: move what most users never touch to a package of its own\n%s",
			len(names), maxFrontPage, strings.Join(names, "\n"))
	}
}

// exportedTopLevel returns the exported names d declares at top level:
// methods are not counted, as go doc lists them under their type.
func exportedTopLevel(d ast.Decl) []string {
	var out []string
	switch d := d.(type) {
	case *ast.FuncDecl:
		if d.Recv == nil && d.Name.IsExported() {
			out = append(out, d.Name.Name)
		}
	case *ast.GenDecl:
		for _, s := range d.Specs {
			switch s := s.(type) {
			case *ast.TypeSpec:
				if s.Name.IsExported() {
					out = append(out, s.Name.Name)
				}
			case *ast.ValueSpec:
				for _, n := range s.Names {
					if n.IsExported() {
						out = append(out, n.Name)
					}
				}
			}
		}
	}
	return out
}
