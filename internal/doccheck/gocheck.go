package doccheck

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// stdImports are the standard packages a Go fragment may use without
// importing them, in any module, by the name it uses.
var stdImports = map[string]string{
	"context": "context",
	"errors":  "errors",
	"fmt":     "fmt",
	"http":    "net/http",
	"io":      "io",
	"os":      "os",
	"slog":    "log/slog",
	"time":    "time",
	"tls":     "crypto/tls",
}

// fragmentImports are the packages a Go fragment of the root module may
// use without importing them, by the name it uses.
var fragmentImports = withStd(map[string]string{
	"runtime":     "github.com/wizardmesh/wizard/runtime",
	"tcp":         "github.com/wizardmesh/wizard/runtime/tcp",
	"quic":        "github.com/wizardmesh/wizard/runtime/quic",
	"swim":        "github.com/wizardmesh/wizard/runtime/swim",
	"lb":          "github.com/wizardmesh/wizard/runtime/lb",
	"nats":        "github.com/wizardmesh/wizard/runtime/nats",
	"microwizard": "github.com/wizardmesh/wizard/runtime/microwizard",
	"pattern":     "github.com/wizardmesh/wizard/runtime/pattern",
	"discovery":   "github.com/wizardmesh/wizard/runtime/discovery",
	"introspect":  "github.com/wizardmesh/wizard/runtime/introspect",
	"gateway":     "github.com/wizardmesh/wizard/gateway",
	"mathv1":      "github.com/wizardmesh/wizard/examples/gen/math/v1",
	"mathsvc":     "github.com/wizardmesh/wizard/examples/services/mathsvc",
	"durable":     "github.com/wizardmesh/wizard/runtime/nats/durable",
	"natsgo":      "github.com/nats-io/nats.go",
	"jetstream":   "github.com/nats-io/nats.go/jetstream",
})

// moduleImports are the packages a fragment of another module may use
// instead, by module directory: what that module's go.mod reaches.
var moduleImports = map[string]map[string]string{
	"otel": withStd(map[string]string{
		"runtime":  "github.com/wizardmesh/wizard/runtime",
		"tcp":      "github.com/wizardmesh/wizard/runtime/tcp",
		"lb":       "github.com/wizardmesh/wizard/runtime/lb",
		"wizotel":  "github.com/wizardmesh/wizard/otel",
		"sdktrace": "go.opentelemetry.io/otel/sdk/trace",
		"metric":   "go.opentelemetry.io/otel/sdk/metric",
	}),
}

// withStd returns m with [stdImports] added.
func withStd(m map[string]string) map[string]string {
	maps.Copy(m, stdImports)
	return m
}

// A Checker type-checks Go blocks against the packages of the modules of
// a checkout, compiled by the go command (their export data).
type Checker struct {
	Root string // the checkout: the root module's directory

	mu      sync.Mutex
	modules map[string]*module // by directory relative to Root
	binDir  string             // the programs built for their help
	bins    map[string]string  // program package → binary
}

// module is one Go module's packages, as go list -export gives them.
type module struct {
	exports map[string]string // import path → export data file
	imp     types.Importer
	fset    *token.FileSet
}

// load returns the module in dir (relative to Root) with export data for
// paths and their dependencies, running go list for the paths not yet
// loaded.
func (c *Checker) load(dir string, paths []string) (*module, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.modules == nil {
		c.modules = map[string]*module{}
	}
	m := c.modules[dir]
	if m == nil {
		m = &module{exports: map[string]string{}, fset: token.NewFileSet()}
		m.imp = importer.ForCompiler(m.fset, "gc", func(path string) (io.ReadCloser, error) {
			f, ok := m.exports[path]
			if !ok || f == "" {
				return nil, fmt.Errorf("no export data for %s", path)
			}
			return os.Open(f)
		})
		c.modules[dir] = m
	}
	var missing []string
	for _, p := range paths {
		if _, ok := m.exports[p]; !ok && p != "C" && p != "unsafe" {
			missing = append(missing, p)
		}
	}
	if len(missing) == 0 {
		return m, nil
	}
	slices.Sort(missing)
	cmd := exec.Command("go", append([]string{"list", "-export", "-deps", "-f", "{{.ImportPath}}\t{{.Export}}"}, missing...)...)
	cmd.Dir = filepath.Join(c.Root, dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list -export in %s: %v\n%s", cmd.Dir, err, stderr.String())
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if path, file, ok := strings.Cut(sc.Text(), "\t"); ok {
			m.exports[path] = file
		}
	}
	return m, nil
}

// CheckGo type-checks a Go block: a complete file as it is, a fragment
// wrapped as the package doc says.
func (c *Checker) CheckGo(b Block) error {
	mod, decls, err := b.goDirective()
	if err != nil {
		return err
	}
	src, fragment := b.Body, !strings.HasPrefix(strings.TrimSpace(b.Body), "package ")
	offset := 0 // lines of the wrapper before the block's first line
	if fragment {
		imports := fragmentImports
		if own, ok := moduleImports[mod]; ok {
			imports = own
		} else if mod != "" {
			return fmt.Errorf("%s: unknown module %q (known: otel)", b, mod)
		}
		src, offset = wrap(b.Body, decls, imports)
	}
	return c.typeCheck(b, mod, src, offset, fragment)
}

// wrap makes a fragment a file: the imports, then a function whose body
// is the declarations and the fragment. It returns the file and how many
// of its lines come before the fragment's first.
func wrap(body, decls string, imports map[string]string) (string, int) {
	var w strings.Builder
	w.WriteString("package doc\n\nimport (\n")
	names := make([]string, 0, len(imports))
	for name := range imports {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		fmt.Fprintf(&w, "\t%s %q\n", name, imports[name])
	}
	w.WriteString(")\n\nfunc _(ctx context.Context) error {\n")
	if decls != "" {
		w.WriteString(decls + "\n")
	}
	offset := strings.Count(w.String(), "\n")
	w.WriteString(body)
	w.WriteString("\treturn nil\n}\n")
	return w.String(), offset
}

// typeCheck checks src, reporting errors at the block's lines. In a
// fragment, unused imports and variables are not errors.
func (c *Checker) typeCheck(b Block, mod, src string, offset int, fragment bool) error {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "block.go", src, parser.SkipObjectResolution)
	if err != nil {
		return fmt.Errorf("%s: %s", b, relocate(err.Error(), b, offset))
	}
	var paths []string
	for _, spec := range f.Imports {
		p, _ := strconv.Unquote(spec.Path.Value)
		paths = append(paths, p)
	}
	m, err := c.load(mod, paths)
	if err != nil {
		return err
	}
	var errs []error
	conf := types.Config{
		Importer: m.imp,
		Error: func(err error) {
			var te types.Error
			if fragment && errors.As(err, &te) && (te.Soft || b.FreeVars && freeVar.MatchString(te.Msg)) {
				return
			}
			errs = append(errs, errors.New(relocate(err.Error(), b, offset)))
		},
	}
	conf.Check("doc", fset, []*ast.File{f}, nil)
	if len(errs) > 0 {
		return fmt.Errorf("%s does not compile:\n%w", b, errors.Join(errs...))
	}
	return nil
}

// freeVar is the error of a name a package doc's example leaves to the
// reader: a lower-case identifier, never a package's exported name.
var freeVar = regexp.MustCompile(`^undefined: [a-z_][A-Za-z0-9_]*$`)

// relocate rewrites "block.go:LINE:COL" in msg to the Markdown file's line.
func relocate(msg string, b Block, offset int) string {
	rest, ok := strings.CutPrefix(msg, "block.go:")
	if !ok {
		return msg
	}
	num, tail, _ := strings.Cut(rest, ":")
	n, err := strconv.Atoi(num)
	if err != nil {
		return msg
	}
	line := b.Line + n - offset
	if n <= offset {
		return "in the wrapper's declarations (the doccheck directive): " + tail
	}
	return fmt.Sprintf("%s:%d:%s", b.File, line, tail)
}
