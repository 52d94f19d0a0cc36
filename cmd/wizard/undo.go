package main

import (
	"os"
	"path/filepath"
	"slices"
)

// undo records what a command creates on disk, so that a command failing
// half-way removes it and leaves the disk as it found it. It removes only
// what did not exist before it was recorded.
type undo struct {
	created []string
}

// mkdirAll makes dir and its missing parents, recording the topmost one
// it made.
func (u *undo) mkdirAll(dir string) error {
	top := ""
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil {
			break
		}
		top = d
		if filepath.Dir(d) == d {
			break
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if top != "" {
		u.created = append(u.created, top)
	}
	return nil
}

// writeFile writes a new file, recording it.
func (u *undo) writeFile(name string, body []byte) error {
	if err := u.mkdirAll(filepath.Dir(name)); err != nil {
		return err
	}
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	u.created = append(u.created, name)
	if _, err := f.Write(body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// expect records names that a step about to run may create, those that
// do not exist now.
func (u *undo) expect(names ...string) {
	for _, n := range names {
		if _, err := os.Lstat(n); err != nil {
			u.created = append(u.created, n)
		}
	}
}

// rollback removes what was recorded, the last first.
func (u *undo) rollback() {
	for _, p := range slices.Backward(u.created) {
		os.RemoveAll(p)
	}
	u.created = nil
}
