package config

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestMatchSegment checks how variables inside one segment split a text:
// a variable followed by literal text ends at that text's first
// occurrence after its first byte; the last takes what is left before
// the segment's literal end; none is empty.
func TestMatchSegment(t *testing.T) {
	for _, tc := range []struct {
		template, text string
		want           []string // nil: no match
	}{
		{"{name}.{ext}", "archive.tar.gz", []string{"archive", "tar.gz"}},
		{"{id}.json", "a.b.json", []string{"a.b"}},
		{"{kind}-items", "big-shoe-items", []string{"big-shoe"}}, // the last variable: up to the literal end
		{"{kind}-items", "shoe-items", []string{"shoe"}},
		{"{a}-{b}", "x-y-z", []string{"x", "y-z"}},
		{"{a}-{b}", "-x", nil},
		{"{a}-{b}", "x-", nil},
		{"{a}-{b}", "--x", []string{"-", "x"}},
		{"v{n}", "v", nil},
		{"v{n}", "v2", []string{"2"}},
		{"{id}.json", ".json", nil},
		{"{x}", "anything at all", []string{"anything at all"}},
		{"pre{a}mid{b}suf", "preXmidYsuf", []string{"X", "Y"}},
		{"pre{a}mid{b}suf", "premidmidYsuf", []string{"mid", "Y"}},
		{"lit", "lit", []string{}},
		{"lit", "lot", nil},
	} {
		pt, err := parsePath("/" + tc.template)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := matchSegment(&pt.segs[0], tc.text, []string{})
		if !ok {
			got = nil
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s on %q (-want +got):\n%s", tc.template, tc.text, diff)
		}
	}
}

// TestParseSizeRate checks the units of sizes and rates.
func TestParseSizeRate(t *testing.T) {
	for in, want := range map[string]Size{"512B": 512, "64KiB": 64 << 10, "1MiB": 1 << 20, "2GiB": 2 << 30, "1kB": 1000, "3MB": 3e6, "0B": 0, " 1 MiB ": 1 << 20} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"1", "1M", "MiB", "-1B", "+1B", "1.5MiB", "99999999999GiB", ""} {
		if got, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) = %v, want an error", in, got)
		}
	}
	for in, want := range map[string]float64{"100/s": 100, "6000/m": 100, "36/h": 0.01, "5/10s": 0.5, "1/500ms": 2} {
		if got, err := ParseRate(in); err != nil || got.PerSecond() != want {
			t.Errorf("ParseRate(%q) = %v (%v/s), %v; want %v/s", in, got, got.PerSecond(), err, want)
		}
	}
	for _, in := range []string{"100", "0/s", "-1/s", "1/x", "1/0s", "/s", "a/s"} {
		if got, err := ParseRate(in); err == nil {
			t.Errorf("ParseRate(%q) = %v, want an error", in, got)
		}
	}
}
