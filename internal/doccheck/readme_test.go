package doccheck

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeTable: the README's table of remote calls is the latest
// comparison's, as compare wrote it into bench/results/results.md: each
// row's req/s at 1, 16, 128 and 1,024 callers, p50 at 1 and p99 at 128,
// and the commit it names.
func TestReadmeTable(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	results, err := os.ReadFile(filepath.Join(root, "bench", "results", "results.md"))
	if err != nil {
		t.Fatal(err)
	}
	// results.md: | callers | contender | req/s | p50 | p99 | … in the unary section.
	type cell struct{ reqs, p50, p99 string }
	measured := map[[2]string]cell{}
	unary := string(results)
	if i := strings.Index(unary, "\n## Unary"); i >= 0 {
		unary = unary[i:]
		if j := strings.Index(unary[1:], "\n## "); j >= 0 {
			unary = unary[:j+1]
		}
	}
	for _, row := range tableRows(unary) {
		if len(row) >= 5 {
			measured[[2]string{row[0], row[1]}] = cell{row[2], row[3], row[4]}
		}
	}
	if len(measured) == 0 {
		t.Fatal("results.md has no unary table")
	}
	commit := regexp.MustCompile(`wizard at ([0-9a-f]{7,})`).FindSubmatch(results)
	if commit == nil || !strings.Contains(string(readme), "run at "+string(commit[1])) {
		t.Errorf("the README does not name the commit results.md was measured at (%s)", commit)
	}
	perf := string(readme)
	if i := strings.Index(perf, "\n## Performance"); i >= 0 {
		perf = perf[i:]
	}
	n := 0
	for _, row := range tableRows(perf) {
		if len(row) != 7 || row[0] == "contender" {
			continue
		}
		n++
		c := row[0]
		want := []string{measured[[2]string{"1", c}].reqs, measured[[2]string{"1", c}].p50,
			measured[[2]string{"16", c}].reqs, measured[[2]string{"128", c}].reqs,
			measured[[2]string{"1024", c}].reqs, measured[[2]string{"128", c}].p99}
		if strings.Join(want, "|") != strings.Join(row[1:], "|") {
			t.Errorf("README row %q: %q, results.md has %q", c, row[1:], want)
		}
	}
	if n == 0 {
		t.Error("the README's Performance section has no table")
	}
}

// tableRows returns the cells of the Markdown table rows in text, the
// separator rows left out.
func tableRows(text string) [][]string {
	var rows [][]string
	for line := range strings.Lines(text) {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "|") || strings.HasPrefix(line, "|---") || strings.HasPrefix(line, "| ---") {
			continue
		}
		var cells []string
		for c := range strings.SplitSeq(strings.Trim(line, "|"), "|") {
			cells = append(cells, strings.TrimSpace(c))
		}
		rows = append(rows, cells)
	}
	return rows
}
