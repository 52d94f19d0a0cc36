package version

import (
	"os"
	"regexp"
	goruntime "runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestReleaseInChangelog: the release is a v0.x semantic version and
// CHANGELOG.md has a section for it.
func TestReleaseInChangelog(t *testing.T) {
	if !regexp.MustCompile(`^v0\.\d+\.\d+$`).MatchString(Release) {
		t.Errorf("Release %q is not a v0.x.y version", Release)
	}
	b, err := os.ReadFile("../../CHANGELOG.md")
	if err != nil {
		t.Fatal(err)
	}
	if heading := "## [" + strings.TrimPrefix(Release, "v") + "]"; !strings.Contains(string(b), "\n"+heading) {
		t.Errorf("CHANGELOG.md has no %q section for Release %s", heading, Release)
	}
}

func TestRead(t *testing.T) {
	v := Read()
	if v.Module != Module || v.Version != Release || v.Go != goruntime.Version() {
		t.Errorf("Read() = %+v, want module %s, version %s, go %s", v, Module, Release, goruntime.Version())
	}
}

func TestWrite(t *testing.T) {
	for _, tt := range []struct {
		name string
		v    Info
		want string
	}{
		{"commit", Info{Version: "v0.4.0", Commit: "abc", Time: "2026-12-02T00:25:46Z", Modified: true, Go: "go1.26.8"},
			"prog v0.4.0\ncommit abc (modified), 2026-12-02T00:25:46Z\ngo     go1.26.8\n"},
		{"no commit", Info{Version: "v0.4.0", Go: "go1.26.8"},
			"prog v0.4.0\ncommit unknown (go run, a build outside a checkout, or -buildvcs=false)\ngo     go1.26.8\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			tt.v.Write(&b, "prog")
			if diff := cmp.Diff(tt.want, b.String()); diff != "" {
				t.Errorf("Write (-want +got):\n%s", diff)
			}
		})
	}
}
