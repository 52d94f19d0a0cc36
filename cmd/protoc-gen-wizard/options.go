package main

import (
	"embed"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// optionsFS holds wizard/v1/options.proto, a copy of
// proto/wizard/v1/options.proto (TestEmbeddedOptions keeps them equal;
// `make generate` copies it), so that a module using wizard gets the
// options its plugin version knows from the plugin itself.
//
//go:embed wizard/v1/options.proto
var optionsFS embed.FS

// optionsPath is where the options file lives under an import root: the
// path .proto files import.
const optionsPath = "wizard/v1/options.proto"

// writeOptions writes wizard/v1/options.proto under dir, creating the
// directories it needs, and returns the path it wrote.
func writeOptions(dir string) (string, error) {
	b, err := fs.ReadFile(optionsFS, optionsPath)
	if err != nil {
		return "", err
	}
	name := filepath.Join(dir, filepath.FromSlash(optionsPath))
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return "", fmt.Errorf("writing the options: %w", err)
	}
	if err := os.WriteFile(name, b, 0o644); err != nil {
		return "", fmt.Errorf("writing the options: %w", err)
	}
	return name, nil
}
