package doccheck

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"strings"
)

// goLike tells a package doc's indented block of Go code from its tables
// and protocol sketches: its first line declares or assigns, calls a
// qualified function, or starts with a Go keyword.
var goLike = regexp.MustCompile(`^(\w+(, \w+)* :?= |import |if |for |return |\w+(\.\w+)+\()`)

// PackageDocBlocks returns the Go examples of the package doc comment of
// the Go file at root/file: its indented blocks whose first line reads as
// Go. An "import" line in a block is left out of the code (the fragment
// has its imports).
func PackageDocBlocks(root, file string) ([]Block, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, filepath.Join(root, file), nil, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		return nil, err
	}
	if f.Doc == nil {
		return nil, nil
	}
	module := ""
	if strings.HasPrefix(file, "otel/") {
		module = "module=otel:"
	}
	var blocks []Block
	var cur *Block
	flush := func() {
		if cur != nil && goLike.MatchString(strings.TrimPrefix(cur.Body, "\n")) {
			blocks = append(blocks, *cur)
		}
		cur = nil
	}
	for _, c := range f.Doc.List {
		line := fset.Position(c.Slash).Line
		text, ok := strings.CutPrefix(c.Text, "//\t")
		if !ok {
			flush()
			continue
		}
		if cur == nil {
			cur = &Block{File: file, Line: line - 1, Lang: "go", Directive: module, FreeVars: true}
		}
		if strings.HasPrefix(text, "import ") {
			text = "// " + text
		}
		cur.Body += text + "\n"
	}
	flush()
	return blocks, nil
}
