package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestEmbeddedOptions checks that the options the plugin writes are
// proto/wizard/v1/options.proto as it is.
func TestEmbeddedOptions(t *testing.T) {
	want, err := os.ReadFile(filepath.Join("..", "..", "proto", filepath.FromSlash(optionsPath)))
	if err != nil {
		t.Fatal(err)
	}
	got, err := optionsFS.ReadFile(optionsPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("cmd/protoc-gen-wizard/%s differs from proto/%[1]s; make generate copies it", optionsPath)
	}
}

// TestWriteOptionsFlag runs the command with --write-options as the
// docs/codegen.md does, into a directory that does not exist yet.
func TestWriteOptionsFlag(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "proto")
	if out, err := runMain(t, nil, "--write-options", dir); err != nil || len(out) > 0 {
		t.Fatalf("--write-options: %v, output %q", err, out)
	}
	got, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(optionsPath)))
	if err != nil {
		t.Fatal(err)
	}
	want, err := optionsFS.ReadFile(optionsPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("--write-options wrote %d bytes that are not the embedded options (%d bytes)", len(got), len(want))
	}
}

// TestWriteOptionsFails checks that a directory that cannot be made is an
// error naming the problem, with exit status 1.
func TestWriteOptionsFails(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := runMain(t, nil, "--write-options", file)
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 1 || !bytes.Contains(ee.Stderr, []byte("writing the options")) {
		t.Fatalf("--write-options into a file: %v, stderr %q; want exit status 1 and the reason", err, stderrOf(err))
	}
}

func stderrOf(err error) []byte {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.Stderr
	}
	return nil
}
