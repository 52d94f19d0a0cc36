package main

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"regexp"
	"strings"
)

// The results file holds the latest run of each mode of compare (the
// comparison, payloads, connections, streams), each section under its own
// top-level heading and naming the command that made it; a new run of a
// mode replaces that mode's section and leaves the others. Earlier runs
// are in git history.

// sectionKind names the mode a section's top-level heading belongs to.
func sectionKind(heading string) string {
	switch {
	case strings.HasPrefix(heading, "# Payloads"):
		return "payload"
	case strings.HasPrefix(heading, "# Streams"):
		return "streams"
	case connsHeading.MatchString(heading):
		return "conns"
	default:
		return "compare"
	}
}

var connsHeading = regexp.MustCompile(`^# \d+ client connections`)

const sectionRule = "\n---\n\n"

// splitSections splits a results file into its preamble (the text before
// the first top-level heading) and its sections, each starting with its
// heading, rules between them dropped.
func splitSections(text string) (preamble string, sections []string) {
	var cur *strings.Builder
	var pre strings.Builder
	for line := range strings.Lines(text) {
		if strings.HasPrefix(line, "# ") {
			sections = append(sections, "")
			if cur != nil {
				sections[len(sections)-2] = cur.String()
			}
			cur = &strings.Builder{}
		}
		if cur == nil {
			pre.WriteString(line)
		} else {
			cur.WriteString(line)
		}
	}
	if cur != nil {
		sections[len(sections)-1] = cur.String()
	}
	for i, s := range sections {
		sections[i] = strings.TrimRight(strings.TrimSuffix(strings.TrimRight(s, "\n"), "\n---"), "\n") + "\n"
	}
	return pre.String(), sections
}

// replaceSections returns text with each of news in place of the section
// of its kind (the last one, if text has several), or after the others
// when text has none of its kind.
func replaceSections(text string, news ...string) string {
	pre, sections := splitSections(text)
	latest := map[string]int{}
	var kept []string
	for _, s := range sections {
		k := sectionKind(firstLine(s))
		if i, ok := latest[k]; ok {
			kept[i] = s
			continue
		}
		latest[k] = len(kept)
		kept = append(kept, s)
	}
	for _, n := range news {
		n = strings.TrimRight(n, "\n") + "\n"
		if i, ok := latest[sectionKind(firstLine(n))]; ok {
			kept[i] = n
			continue
		}
		latest[sectionKind(firstLine(n))] = len(kept)
		kept = append(kept, n)
	}
	return pre + strings.Join(kept, sectionRule)
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// writeResults renders each section and writes them into the results file
// at path in place of the sections of their kinds.
func writeResults(path string, sections ...func(io.Writer) error) error {
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	var news []string
	for _, s := range sections {
		var b bytes.Buffer
		if err := s(&b); err != nil {
			return err
		}
		news = append(news, b.String())
	}
	return os.WriteFile(path, []byte(replaceSections(string(old), news...)), 0o644)
}
