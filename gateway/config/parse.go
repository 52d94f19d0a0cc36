package config

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
)

// MaxFileSize is the largest configuration file [Parse] reads: a file of
// 2,000 routes takes about 200KiB. (The YAML parser takes time quadratic
// in the keys of one mapping: a hostile file of this size with one
// mapping of 20,000 unknown keys takes seconds.)
const MaxFileSize = 256 << 10

// Parse decodes and validates a configuration file; name is the file's
// name for the problems' positions. A returned error holds every
// [*Problem] found (joined with [errors.Join], in the order of the file),
// one per line of its text; the Config is nil then.
func Parse(name string, data []byte) (*Config, error) {
	ps := &problems{file: name}
	c := &Config{file: name}
	if len(data) > MaxFileSize {
		ps.add(pos{}, "", "the file is %d bytes; the limit is %d", len(data), MaxFileSize)
		return nil, ps.err()
	}
	if at, ok := checkFlowDepth(data); !ok {
		ps.add(at, "", "brackets nest deeper than %d", maxFlowDepth)
		return nil, ps.err()
	}
	root, ok := parseYAML(ps, data)
	if ok {
		where := map[string]pos{}
		over := false
		if root != nil {
			d := newDecoder(ps, root)
			d.decode(root, reflect.ValueOf(c).Elem(), "", 0)
			where, over = d.where, d.over
		}
		if !c.broken && !over {
			validate(c, ps, where)
		}
	}
	if err := ps.err(); err != nil {
		return nil, err
	}
	return c, nil
}

// Load reads and parses the configuration file at path.
func Load(path string) (*Config, error) {
	data, err := readFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, data)
}

// Check loads the file at path and returns nil when it is valid, else
// an error whose text lists every problem, one per line, as
// FILE:LINE:COL: WHERE: REASON (what `wizard-gateway check-config FILE`
// prints).
func Check(path string) error {
	_, err := Load(path)
	return err
}

// readFile reads at most MaxFileSize+1 bytes of path.
func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("wizard: gateway: config: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("wizard: gateway: config: %w", err)
	}
	if st.IsDir() {
		return nil, fmt.Errorf("wizard: gateway: config: %s is a directory", path)
	}
	if st.Size() > MaxFileSize {
		return nil, &Problem{File: path, Reason: fmt.Sprintf("the file is %d bytes; the limit is %d", st.Size(), MaxFileSize)}
	}
	data := make([]byte, st.Size())
	n, err := f.ReadAt(data, 0)
	if err != nil && n < len(data) {
		return nil, fmt.Errorf("wizard: gateway: config: %w", err)
	}
	return data, nil
}

// parseYAML parses data into a tree; the root is nil for an empty file.
// A syntax error is a problem at its position.
func parseYAML(ps *problems, data []byte) (root ast.Node, ok bool) {
	f, err := parseBytes(data)
	if err != nil {
		var ye yaml.Error
		if errors.As(err, &ye) {
			ps.add(tokenPos(ye.GetToken()), "", "%s", ye.GetMessage())
		} else {
			ps.add(pos{}, "", "%v", err)
		}
		return nil, false
	}
	var docs []*ast.DocumentNode
	for _, d := range f.Docs {
		if d != nil && d.Body != nil {
			docs = append(docs, d)
		}
	}
	switch len(docs) {
	case 0:
		return nil, true
	case 1:
		return docs[0].Body, true
	}
	ps.add(posOf(docs[1].Body), "", "a second YAML document; the file holds one")
	return nil, false
}

// parseBytes is the YAML parser, its panics turned into errors.
func parseBytes(data []byte) (f *ast.File, err error) {
	defer func() {
		if r := recover(); r != nil {
			f, err = nil, fmt.Errorf("the YAML parser failed: %v", r)
		}
	}()
	return parser.ParseBytes(data, 0)
}

// maxFlowDepth bounds the nesting of flow collections ([...] and {...}):
// the YAML parser takes time quadratic in it.
const maxFlowDepth = 64

// checkFlowDepth reports whether data's flow collections nest at most
// maxFlowDepth deep, and where they go deeper. It skips comments and
// quoted scalars (a quote counts only where a token starts); brackets
// inside plain scalars count, which errs on the side of refusing.
func checkFlowDepth(data []byte) (pos, bool) {
	depth, line, col := 0, 1, 0
	for i := 0; i < len(data); i++ {
		c := data[i]
		col++
		if c == '\n' {
			line, col = line+1, 0
			continue
		}
		tokenStart := i == 0 || strings.IndexByte(" \t\r\n[{,:", data[i-1]) >= 0
		switch {
		case c == '#' && tokenStart:
			for i+1 < len(data) && data[i+1] != '\n' {
				i++
			}
		case (c == '"' || c == '\'') && tokenStart:
			for i++; i < len(data); i++ {
				col++
				if data[i] == '\n' {
					line, col = line+1, 0
				}
				if c == '"' && data[i] == '\\' {
					i++
					col++
					continue
				}
				if data[i] == c {
					if c == '\'' && i+1 < len(data) && data[i+1] == '\'' {
						i++
						col++
						continue
					}
					break
				}
			}
		case c == '[' || c == '{':
			if depth++; depth > maxFlowDepth {
				return pos{line, col}, false
			}
		case c == ']' || c == '}':
			depth = max(depth-1, 0)
		}
	}
	return pos{}, true
}
