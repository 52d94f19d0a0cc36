package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestInitFailedStep: a go step of wizard init that fails (here go get of
// a wizard replaced by a directory that does not exist) leaves nothing
// half-made: a DIR init made is gone, and a DIR that existed holds what it
// held.
func TestInitFailedStep(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go tool")
	}
	t.Setenv("GOFLAGS", "-mod=mod")
	t.Setenv("GOPROXY", "off") // nothing to fetch: the failure is local
	t.Setenv("GOWORK", "off")
	missing := filepath.Join(t.TempDir(), "no-wizard-here")

	fresh := filepath.Join(t.TempDir(), "fresh", "hello")
	r := wizard(t, "", "init", "--module", "example.com/hello", "--replace", missing, fresh)
	if r.code == 0 || !strings.Contains(r.err, "go get -tool") {
		t.Fatalf("init with a missing wizard: exit %d\n%s%s\nwant go get to fail", r.code, r.out, r.err)
	}
	if _, err := os.Lstat(filepath.Dir(fresh)); !os.IsNotExist(err) {
		t.Errorf("%s is left behind (%v); init made it", filepath.Dir(fresh), err)
	}

	kept := t.TempDir()
	if err := os.WriteFile(filepath.Join(kept, "notes.txt"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = wizard(t, "", "init", "--module", "example.com/hello", "--replace", missing, kept)
	if r.code == 0 {
		t.Fatalf("init with a missing wizard: exit 0\n%s", r.out)
	}
	var left []string
	filepath.WalkDir(kept, func(p string, d os.DirEntry, err error) error {
		if p != kept {
			rel, _ := filepath.Rel(kept, p)
			left = append(left, rel)
		}
		return err
	})
	if !slices.Equal(left, []string{"notes.txt"}) {
		t.Errorf("left in an existing DIR: %v; want notes.txt alone", left)
	}
}
