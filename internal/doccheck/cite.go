package doccheck

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

var (
	// citedPath is a path in backquotes that names a file of the tree by
	// its extension or a directory by a trailing slash.
	citedPath = regexp.MustCompile("`((?:[\\w.-]+/)+[\\w.-]+\\.(?:go|md|yaml|proto|svg|golden|mjs|json)|(?:[\\w.-]+/)+)`")
	// citedTest is a test, benchmark or fuzz target named in prose.
	citedTest = regexp.MustCompile(`\b((?:Test|Benchmark|Fuzz)[A-Z]\w*)`)
	testFunc  = regexp.MustCompile(`(?m)^func ((?:Test|Benchmark|Fuzz)\w+)\(`)
)

// Citations returns the errors of a Markdown file's citations of the
// tree: a path in backquotes whose first element is the root's but that
// is not there, and a Test, Benchmark or Fuzz function that no test file
// defines (a name that starts one or more, as go test -run matches it, is
// defined). known holds the test functions of the tree.
func Citations(root, file, text string, known map[string]bool) []error {
	var errs []error
	prose := withoutCode(text)
	for _, m := range citedPath.FindAllStringSubmatchIndex(prose, -1) {
		p := prose[m[2]:m[3]]
		if strings.ContainsAny(p, "<*") || strings.HasPrefix(p, "example.com/") || strings.HasPrefix(p, "github.com/") {
			continue
		}
		first, _, _ := strings.Cut(p, "/")
		if _, err := os.Stat(filepath.Join(root, first)); err != nil {
			continue // not a path of this tree (a user's module, a path inside a proto module)
		}
		if _, err := os.Stat(filepath.Join(root, p)); err == nil {
			continue
		}
		line := strings.Count(prose[:m[0]], "\n") + 1
		errs = append(errs, fmt.Errorf("%s:%d: cites %s, which is not in the tree", file, line, p))
	}
	for _, m := range citedTest.FindAllStringSubmatchIndex(prose, -1) {
		name := prose[m[2]:m[3]]
		if !known[name] && !startsOne(known, name) {
			line := strings.Count(prose[:m[0]], "\n") + 1
			errs = append(errs, fmt.Errorf("%s:%d: cites %s, which no test file defines", file, line, name))
		}
	}
	return errs
}

func startsOne(known map[string]bool, prefix string) bool {
	for k := range known {
		if strings.HasPrefix(k, prefix) {
			return true
		}
	}
	return false
}

// TestFuncs returns the Test, Benchmark and Fuzz functions defined in the
// tree's test files.
func TestFuncs(root string) (map[string]bool, error) {
	known := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range testFunc.FindAllSubmatch(b, -1) {
			known[string(m[1])] = true
		}
		return nil
	})
	return known, err
}
