package doccheck

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wizardmesh/wizard/internal/testkit/need"
)

// docs are the Markdown files whose code blocks are checked, relative to
// the root.
func docs(t *testing.T, root string) []string {
	t.Helper()
	files := []string{"README.md", "CONTRIBUTING.md"}
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pages {
		files = append(files, filepath.Join("docs", filepath.Base(p)))
	}
	return files
}

// TestDocs compiles or runs every code block of README.md, CONTRIBUTING.md
// and docs/*.md, as the package doc says for each language.
func TestDocs(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		need.Skipf(t, "needs the go tool on PATH: %v", err)
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	c := &Checker{Root: root}
	t.Cleanup(func() { c.Close() })
	for _, file := range docs(t, root) {
		text, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			t.Fatal(err)
		}
		blocks, err := Blocks(file, string(text))
		if err != nil {
			t.Fatal(err)
		}
		t.Run(file, func(t *testing.T) {
			for _, b := range blocks {
				t.Run(fmt.Sprintf("line %d %s", b.Line, b.Lang), func(t *testing.T) { checkBlock(t, c, b) })
			}
		})
	}
}

func checkBlock(t *testing.T, c *Checker, b Block) {
	t.Helper()
	if reason, ok := b.skip(); ok {
		t.Logf("%s: not checked: %s", b, reason)
		return
	}
	if file, ok := b.excerpt(); ok {
		if err := c.CheckExcerpt(b, file); err != nil {
			t.Error(err)
		}
		return
	}
	var err error
	switch b.Lang {
	case "go":
		if mod, _, _ := b.goDirective(); mod != "" {
			if _, lerr := c.load(mod, []string{"fmt"}); lerr != nil {
				need.Skipf(t, "%s: the %s module's packages are not at hand: %v", b, mod, lerr)
				return
			}
		}
		err = c.CheckGo(b)
	case "sh", "console":
		err = c.CheckShell(b)
	case "yaml":
		err = CheckYAML(b)
	case "conf":
		err = CheckNATSConf(b)
	case "proto":
		buf := need.Buf(t, c.Root, "go")
		if buf == "" {
			return
		}
		err = c.CheckProto(b, buf)
	case "text":
	default:
		t.Errorf("%s: a code block's language is one of go, proto, yaml, conf, sh, console or text", b)
	}
	if err != nil {
		t.Error(err)
	}
}

// TestPackageDocs compiles the Go examples of every package doc (doc.go),
// their free variables standing for the reader's own.
func TestPackageDocs(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		need.Skipf(t, "needs the go tool on PATH: %v", err)
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("git", "-C", root, "ls-files", "*doc.go", "**/doc.go").Output()
	if err != nil {
		need.Skipf(t, "needs a git checkout to list the package docs: %v", err)
	}
	c := &Checker{Root: root}
	t.Cleanup(func() { c.Close() })
	n := 0
	for _, file := range strings.Fields(string(out)) {
		if strings.HasPrefix(file, "bench/") || strings.Contains(file, "testdata/") {
			continue
		}
		blocks, err := PackageDocBlocks(root, file)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range blocks {
			n++
			t.Run(fmt.Sprintf("%s:%d", file, b.Line), func(t *testing.T) { checkBlock(t, c, b) })
		}
	}
	if n == 0 {
		t.Error("no package doc has a Go example: the extraction is broken")
	}
}

// TestLinks: every relative link of the documentation reaches a file,
// and its anchor a heading there.
func TestLinks(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range append(docs(t, root), "CHANGELOG.md", "bench/README.md") {
		text, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			t.Fatal(err)
		}
		for _, err := range Links(root, file, string(text)) {
			t.Error(err)
		}
	}
}

// TestCitations: every file the documentation cites in backquotes is in
// the tree, and every test, benchmark and fuzz target it names exists.
func TestCitations(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	known, err := TestFuncs(root)
	if err != nil {
		t.Fatal(err)
	}
	if !known["TestCitations"] {
		t.Fatal("TestFuncs does not find this test")
	}
	for _, file := range docs(t, root) {
		text, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			t.Fatal(err)
		}
		for _, err := range Citations(root, file, string(text), known) {
			t.Error(err)
		}
	}
}

func TestLinksFail(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	errs := Links(root, "x.md", "[a](nope.md), [b](README.md#nope), [c](README.md#performance)\n```go\n[d](nope.go)\n```\n")
	if len(errs) != 2 {
		t.Errorf("Links found %d errors, want 2 (a missing file, a missing anchor): %v", len(errs), errs)
	}
}

func TestSlug(t *testing.T) {
	for h, want := range map[string]string{
		"The CLI's bench":                      "the-clis-bench",
		"Add a transport":                      "add-a-transport",
		"From the shell: `wizard`":             "from-the-shell-wizard",
		"Typed stubs: annotate → buf generate": "typed-stubs-annotate--buf-generate",
	} {
		if got := slug(h); got != want {
			t.Errorf("slug(%q) = %q, want %q", h, got, want)
		}
	}
}

// TestBlocks: the parser finds fenced blocks, indented ones in lists
// included, and the directive on the line before.
func TestBlocks(t *testing.T) {
	text := strings.Join([]string{
		"# T",
		"<!-- doccheck: var x int -->",
		"```go",
		"x++",
		"```",
		"- a list item:",
		"",
		"  ```sh",
		"  go test ./...",
		"  ```",
	}, "\n")
	blocks, err := Blocks("t.md", text)
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) != 2 {
		t.Fatalf("%d blocks, want 2: %+v", len(blocks), blocks)
	}
	if b := blocks[0]; b.Lang != "go" || b.Line != 3 || b.Body != "x++\n" || b.Directive != ": var x int" {
		t.Errorf("block 1: %+v", b)
	}
	if b := blocks[1]; b.Lang != "sh" || b.Line != 8 || b.Body != "go test ./...\n" || b.Directive != "" {
		t.Errorf("block 2: %+v", b)
	}
	if _, err := Blocks("t.md", "```go\nx\n"); err == nil {
		t.Error("an unclosed block is not an error")
	}
}

// TestCheckFails: a fragment that does not compile, a command that does
// not exist, a flag a program does not take, a make target that does not
// exist and a configuration the gateway refuses are each an error naming
// the Markdown line.
func TestCheckFails(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	c := &Checker{Root: root}
	t.Cleanup(func() { c.Close() })
	for _, tt := range []struct {
		name string
		b    Block
		want string
	}{
		{"go", Block{File: "x.md", Line: 10, Lang: "go", Body: "node, err := runtime.New()\nnode.Addd(\"a:b\", nil)\n"}, "x.md:12:"},
		{"go directive", Block{File: "x.md", Line: 10, Lang: "go", Directive: ": var n *runtime.Node", Body: "n.Close(1)\n"}, "x.md:11:"},
		{"complete file", Block{File: "x.md", Line: 1, Lang: "go", Body: "package main\n\nfunc main() { x := 1 }\n"}, "declared and not used"},
		{"go run", Block{File: "x.md", Line: 1, Lang: "sh", Body: "go run ./examples/services/nothere\n"}, "no package directory"},
		{"flag", Block{File: "x.md", Line: 1, Lang: "sh", Body: "go run ./examples/services/mathserver -nosuchflag 1\n"}, "-nosuchflag"},
		{"wizard subcommand", Block{File: "x.md", Line: 1, Lang: "console", Body: "$ wizard nosuch\n"}, "wizard help nosuch"},
		{"wizard flag", Block{File: "x.md", Line: 1, Lang: "console", Body: "$ wizard act --nosuch a:b\n"}, "--nosuch"},
		{"package doc", Block{File: "x.go", Line: 1, Lang: "go", FreeVars: true, Body: "tr := tcp.New()\nnode, err := runtime.New(runtime.WithTransport(tr))\n"}, "x.go:2:"},
		{"package doc name", Block{File: "x.go", Line: 1, Lang: "go", FreeVars: true, Body: "runtime.New(runtime.WithTransports(tr))\n"}, "WithTransports"},
		{"make", Block{File: "x.md", Line: 1, Lang: "sh", Body: "make nosuch\n"}, "no target nosuch"},
		{"program", Block{File: "x.md", Line: 1, Lang: "sh", Body: "frobnicate --now\n"}, "frobnicate"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			if tt.b.Lang == "go" {
				err = c.CheckGo(tt.b)
			} else {
				err = c.CheckShell(tt.b)
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
	t.Run("proto", func(t *testing.T) {
		buf := need.Buf(t, root, "go")
		proto := "syntax = \"proto3\";\npackage d.v1;\nimport \"wizard/v1/options.proto\";\n" +
			"service S {\n  option (wizard.v1.service) = {pattern: \"role:s,\"};\n  rpc A(M) returns (M);\n}\nmessage M {}\n"
		if err := c.CheckProto(Block{File: "x.md", Line: 1, Lang: "proto", Body: proto}, buf); err == nil || !strings.Contains(err.Error(), "role:s,") {
			t.Errorf("a proto block with a bad pattern: %v", err)
		}
	})
	if err := CheckYAML(Block{File: "x.md", Line: 1, Lang: "yaml", Body: "routes:\n  - name: a\n    colour: red\n"}); err == nil {
		t.Error("a gateway configuration with an unknown key loads")
	}
	if err := CheckNATSConf(Block{File: "x.md", Line: 1, Lang: "conf", Body: "authorization { users = [\n"}); err == nil {
		t.Error("a broken nats-server configuration parses")
	}
}

func TestCommandsOf(t *testing.T) {
	got := commandsOf(`cd bench && GODEBUG=gctrace=1 go run ./cmd/compare -out $(mktemp -d) 'a b' # note`)
	want := [][]string{{"cd", "bench"}, {"go", "run", "./cmd/compare", "-out", "$()", "a b"}}
	if sub := commandsOf("(cd otel && go vet)"); len(sub) != 4 || sub[0][0] != "(" || sub[3][0] != ")" {
		t.Errorf("a subshell: %q", sub)
	}
	if len(got) != len(want) {
		t.Fatalf("commandsOf = %q, want %q", got, want)
	}
	for i := range want {
		if strings.Join(got[i], "|") != strings.Join(want[i], "|") {
			t.Errorf("command %d = %q, want %q", i, got[i], want[i])
		}
	}
}
