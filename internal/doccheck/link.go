package doccheck

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

var (
	link    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	heading = regexp.MustCompile(`(?m)^#{1,6} (.+)$`)
)

// Links returns the errors of a Markdown file's relative links: a target
// that does not exist, or an anchor (#…) that no heading of the target
// makes. Links inside code blocks are not links.
func Links(root, file, text string) []error {
	var errs []error
	prose := withoutCode(text)
	for _, m := range link.FindAllStringSubmatchIndex(prose, -1) {
		target := prose[m[2]:m[3]]
		if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
			continue
		}
		line := strings.Count(prose[:m[0]], "\n") + 1
		path, anchor, _ := strings.Cut(target, "#")
		full := filepath.Join(root, file)
		if path != "" {
			full = filepath.Join(root, filepath.Dir(file), path)
		}
		if _, err := os.Stat(full); err != nil {
			errs = append(errs, fmt.Errorf("%s:%d: the link %s: no such file", file, line, target))
			continue
		}
		if anchor == "" || !strings.HasSuffix(full, ".md") {
			continue
		}
		b, err := os.ReadFile(full)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !hasAnchor(withoutCode(string(b)), anchor) {
			errs = append(errs, fmt.Errorf("%s:%d: the link %s: no heading makes the anchor #%s", file, line, target, anchor))
		}
	}
	return errs
}

func hasAnchor(text, anchor string) bool {
	for _, m := range heading.FindAllStringSubmatch(text, -1) {
		if slug(m[1]) == anchor {
			return true
		}
	}
	return false
}

// slug is the anchor GitHub makes of a heading: lower case, punctuation
// dropped, spaces as hyphens.
func slug(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(h)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127 && r != '→' && r != '—' && r != '·':
			b.WriteRune(r)
		}
	}
	return b.String()
}

// withoutCode blanks the lines of fenced code blocks, keeping the line
// count.
func withoutCode(text string) string {
	lines := strings.Split(text, "\n")
	in := false
	for i, l := range lines {
		if fence.MatchString(l) || in && strings.TrimSpace(l) == "```" {
			in = !in
			lines[i] = ""
			continue
		}
		if in {
			lines[i] = ""
		}
	}
	return strings.Join(lines, "\n")
}
