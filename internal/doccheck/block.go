// Package doccheck compiles or runs every code block of the repository's
// Markdown documentation (README.md, CONTRIBUTING.md and docs/*.md), so
// that a block that stops compiling, a command that no longer exists or a
// configuration the gateway no longer loads fails `go test ./...`.
//
// What each fenced block's language makes of it:
//
//   - go: a block that starts with a package clause is a complete file and
//     is type-checked as the compiler would. Any other block is a fragment:
//     the statements of a function of ctx context.Context returning error,
//     with the packages of
//     [fragmentImports] imported under their usual names (an import or a
//     variable a fragment leaves unused is not an error). Variables a
//     fragment uses but does not declare are declared by an HTML comment
//     on the line before the block: <!-- doccheck: var ctx context.Context -->
//     (any Go statements, separated by ";"). <!-- doccheck module=otel: … -->
//     compiles the fragment in the otel module, with the imports of
//     [moduleImports] (wizotel and OpenTelemetry's SDK among them).
//   - proto: a complete .proto file, built with buf against proto/ (the
//     wizard options), then run through protoc-gen-wizard (its patterns
//     checked); skipped without buf unless WIZARD_REQUIRE=1.
//   - yaml: a gateway configuration, loaded by gateway/config.Parse; a block
//     whose first line is "# buf.yaml" or "# buf.gen.yaml" only parses as
//     YAML (TestOutsideModule in cmd/protoc-gen-wizard runs those).
//   - conf: a nats-server configuration, parsed by nats-server's parser.
//   - sh and console (only lines starting with "$ "): every command names
//     something that exists: go run/test/build/install of a path in the
//     tree, with the flags the program's -h lists; wizard and wizard-gateway
//     subcommands and flags, as their help lists them; make targets; files
//     under .ci/. Other programs must be in [otherCommands].
//   - text: not checked (output, diagrams).
//
// <!-- doccheck: excerpt FILE --> before a block, of any language, checks
// instead that its lines appear together, in order, in FILE (relative to
// the root): a part of a file that other tests check, such as a
// Kubernetes manifest under deploy/kubernetes, which the deploy module
// decodes strictly ([Checker.CheckExcerpt]).
//
// <!-- doccheck: skip REASON --> before a block leaves it unchecked, with
// the reason in the test log.
//
// Beyond the blocks: the Go examples of every package doc (doc.go) are
// compiled, their undeclared lower-case names left to the reader
// ([PackageDocBlocks]); every relative link reaches its file and anchor
// ([Links]); every file of the tree and every Test, Benchmark or Fuzz
// function the prose cites exists ([Citations]).
package doccheck

import (
	"fmt"
	"regexp"
	"strings"
)

// A Block is one fenced code block of a Markdown file.
type Block struct {
	File      string // the Markdown file
	Line      int    // the line of the opening fence
	Lang      string // the fence's language ("" when none)
	Body      string // the block's text, its indentation removed
	Directive string // the text of a <!-- doccheck… --> comment on the line before, after "doccheck"
	// FreeVars: the block is a package doc's example, whose variables
	// (lower-case names it uses but does not declare) stand for the
	// reader's own; every other name it uses must exist.
	FreeVars bool
}

func (b Block) String() string { return fmt.Sprintf("%s:%d (%s)", b.File, b.Line, b.Lang) }

var (
	fence     = regexp.MustCompile("^(\\s*)```(\\S*)\\s*$")
	directive = regexp.MustCompile(`^\s*<!--\s*doccheck(.*?)-->\s*$`)
)

// Blocks returns the fenced code blocks of a Markdown file's text.
func Blocks(file, text string) ([]Block, error) {
	lines := strings.Split(text, "\n")
	var blocks []Block
	for i := 0; i < len(lines); i++ {
		m := fence.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		b := Block{File: file, Line: i + 1, Lang: m[2]}
		if i > 0 {
			if d := directive.FindStringSubmatch(lines[i-1]); d != nil {
				b.Directive = strings.TrimSpace(d[1])
			}
		}
		indent := m[1]
		var body []string
		closed := false
		for i++; i < len(lines); i++ {
			if strings.TrimSpace(lines[i]) == "```" {
				closed = true
				break
			}
			body = append(body, strings.TrimPrefix(lines[i], indent))
		}
		if !closed {
			return nil, fmt.Errorf("%s:%d: the code block is not closed", file, b.Line)
		}
		if len(body) > 0 {
			b.Body = strings.Join(body, "\n") + "\n"
		}
		blocks = append(blocks, b)
	}
	return blocks, nil
}

// skip reports whether b's directive says to leave it unchecked, and why.
func (b Block) skip() (string, bool) {
	d, ok := strings.CutPrefix(b.Directive, ":")
	if !ok {
		return "", false
	}
	reason, ok := strings.CutPrefix(strings.TrimSpace(d), "skip")
	return strings.TrimLeft(reason, ": "), ok
}

// goDirective returns the module directory of b's directive ("" for the
// root module) and the declarations it gives.
func (b Block) goDirective() (module, decls string, err error) {
	d := b.Directive
	if rest, ok := strings.CutPrefix(d, "module="); ok {
		module, d, _ = strings.Cut(rest, ":")
		return module, d, nil
	}
	if d == "" {
		return "", "", nil
	}
	decls, ok := strings.CutPrefix(d, ":")
	if !ok {
		return "", "", fmt.Errorf("%s: a directive is <!-- doccheck: DECLARATIONS --> or <!-- doccheck module=DIR: DECLARATIONS -->, got %q", b, d)
	}
	return "", decls, nil
}
