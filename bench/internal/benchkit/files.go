package benchkit

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// WriteFile creates the file at path and writes it with fn.
func WriteFile(path string, fn func(w io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := fn(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Ints parses a comma-separated list of positive numbers, the value of
// the flag named name; empty items are skipped.
func Ints(name, s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("-%s: %q is not a positive number", name, f)
		}
		out = append(out, n)
	}
	return out, nil
}
