package doccheck

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// excerpt returns the file b's directive says b is an excerpt of:
// <!-- doccheck: excerpt FILE -->, FILE relative to the root.
func (b Block) excerpt() (string, bool) {
	d, ok := strings.CutPrefix(b.Directive, ":")
	if !ok {
		return "", false
	}
	return strings.CutPrefix(strings.TrimSpace(d), "excerpt ")
}

// CheckExcerpt checks that b's lines appear, in order and together, in
// file: a block that shows part of a file the tree checks otherwise (a
// Kubernetes manifest, which the deploy module decodes strictly) and
// that must not drift from it. Trailing spaces do not count.
func (c *Checker) CheckExcerpt(b Block, file string) error {
	text, err := os.ReadFile(filepath.Join(c.Root, file))
	if err != nil {
		return fmt.Errorf("%s: excerpt of %s: %w", b, file, err)
	}
	want := trimLines(b.Body)
	got := trimLines(string(text))
	for i := 0; i+len(want) <= len(got); i++ {
		if equalLines(got[i:i+len(want)], want) {
			return nil
		}
	}
	return fmt.Errorf("%s: the block is not an excerpt of %s: its lines do not appear there together, in order", b, file)
}

func trimLines(s string) []string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " \t")
	}
	return lines
}

func equalLines(a, b []string) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
