package main

import (
	"bufio"
	"context"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/wizardmesh/wizard/internal/testkit/need"
	"github.com/wizardmesh/wizard/internal/testkit/outside"
)

// TestOutsideModule follows the "Typed stubs" steps of docs/codegen.md in a new
// module, example.com/shop, in a temporary directory: it copies the user's
// own files (testdata/outside: a contract, a server, a client), writes the
// page's buf.yaml and buf.gen.yaml, runs the page's commands as they
// are written, then starts bin/server and checks that bin/client gets the
// right answers over TCP on 127.0.0.1, from a unary call and from a
// stream. The commands and files come from the page itself, so the two
// cannot drift apart.
//
// Only one thing stands in for a published wizard: a replace directive to
// this checkout, added right after `go mod init`. The module cache comes
// first in GOPROXY (file://$GOMODCACHE/cache/download), so the checkout's
// dependencies resolve as they do for the checkout itself, then the
// environment's proxy. It needs buf (on PATH, or where `make buf` puts it)
// and the go tool; without them, or offline, it skips, unless
// WIZARD_REQUIRE=1.
func TestOutsideModule(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module: skipped in -short mode")
	}
	goTool, root := outside.Tools(t)
	steps := pageSteps(t, filepath.Join(root, "docs", "codegen.md"))
	bufTool := need.Buf(t, root, goTool)

	// Not t.Context(): that ends before the cleanup that stops the server.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel) // after the server's cleanup, which waits for it
	mod := t.TempDir()
	if err := os.CopyFS(mod, os.DirFS(filepath.Join("testdata", "outside"))); err != nil {
		t.Fatal(err)
	}
	for name, content := range steps.files {
		if err := os.WriteFile(filepath.Join(mod, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env := outside.Env(t, goTool)
	for i, args := range steps.commands {
		switch args[0] {
		case "go":
			args[0] = goTool
		case "buf":
			args[0] = bufTool
		default:
			t.Fatalf("docs/codegen.md step %q: the test runs only go and buf", strings.Join(args, " "))
		}
		outside.Run(t, ctx, mod, env, args...)
		if i == 0 { // after go mod init: the stand-in for a published version
			outside.Run(t, ctx, mod, env, goTool, "mod", "edit", "-replace", "github.com/wizardmesh/wizard="+root)
		}
	}

	// Outside what the page lists: no copy of the options was generated.
	if err := filepath.WalkDir(mod, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.Name() == "options.pb.go" {
			t.Errorf("buf generate wrote %s: options.proto is not the module's to generate", path)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}

	server := exec.CommandContext(ctx, filepath.Join(mod, "bin", "server"))
	stdin, err := server.StdinPipe() // the server serves until it closes
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := server.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	server.Stderr = os.Stderr
	if err := server.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		if err := server.Wait(); err != nil {
			t.Errorf("server: %v", err)
		}
	})
	addr, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the server's address: %v", err)
	}
	go io.Copy(io.Discard, stdout)
	out, err := exec.CommandContext(ctx, filepath.Join(mod, "bin", "client"), strings.TrimSpace(addr)).CombinedOutput()
	if err != nil {
		t.Fatalf("client: %v\n%s", err, out)
	}
	if got, want := string(out), "total_cents: 750\neach: 250\neach: 500\n"; got != want {
		t.Errorf("client printed %q, want %q", got, want)
	}

	// A second package that shares a pattern with the first: buf generate,
	// as the page configures it, fails naming the pattern, as generation
	// in this repository does (the plugin must see both packages at once).
	rival := filepath.Join(mod, "proto", "rival", "v1", "rival.proto")
	if err := os.MkdirAll(filepath.Dir(rival), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(rival, []byte(rivalProto), 0o644); err != nil {
		t.Fatal(err)
	}
	gen := exec.CommandContext(ctx, bufTool, "generate")
	gen.Dir, gen.Env = mod, env
	out, err = gen.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "cmd:quote,role:price") {
		t.Errorf("buf generate with role:price,cmd:quote in two packages: %v\n%s\nwant it to fail naming the pattern (buf.gen.yaml: strategy: all)", err, out)
	}
}

// rivalProto is a contract of another package whose method's pattern,
// role:price,cmd:quote, is testdata/outside's shop.v1 Quote's.
const rivalProto = `syntax = "proto3";

package rival.v1;

import "wizard/v1/options.proto";

option go_package = "example.com/shop/gen/rival/v1;rivalv1";

service RivalService {
  option (wizard.v1.service) = {pattern: "role:price"};
  rpc Quote(QuoteRequest) returns (QuoteResponse);
}

message QuoteRequest {}

message QuoteResponse {}
`

// outsideSteps are docs/codegen.md's steps for a module outside this one.
type outsideSteps struct {
	commands [][]string        // the sh block, a command a line
	files    map[string]string // yaml blocks whose first line is "# <name>"
}

// pageSteps reads the steps from the "Typed stubs" section of the page
// at path: its one sh block, a command a line, and its buf.yaml and
// buf.gen.yaml blocks. The commands must run without a shell, so they may
// hold no quotes, pipes, redirections or variables.
func pageSteps(t *testing.T, path string) outsideSteps {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	section := string(b)
	start := strings.Index(section, "\n## Typed stubs")
	if start < 0 {
		t.Fatalf("%s has no \"## Typed stubs\" section", path)
	}
	section = section[start+1:]
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	steps := outsideSteps{files: map[string]string{}}
	sh := 0
	for _, m := range regexp.MustCompile("(?ms)^```(\\w+)\n(.*?)^```$").FindAllStringSubmatch(section, -1) {
		lang, body := m[1], m[2]
		switch {
		case lang == "sh":
			sh++
			for line := range strings.Lines(body) {
				if strings.ContainsAny(line, "\"'|&;<>$`*") {
					t.Fatalf("docs/codegen.md step %q needs a shell; the steps are plain commands", strings.TrimSpace(line))
				}
				if args := strings.Fields(line); len(args) > 0 {
					steps.commands = append(steps.commands, args)
				}
			}
		case lang == "yaml":
			first, _, _ := strings.Cut(body, "\n")
			if name, ok := strings.CutPrefix(first, "# "); ok {
				steps.files[name] = body
			}
		}
	}
	if sh != 1 || len(steps.commands) == 0 {
		t.Fatalf("the Typed stubs section has %d sh blocks; want one, of the steps", sh)
	}
	if got := strings.Join(steps.commands[0], " "); got != "go mod init example.com/shop" {
		t.Fatalf("the first step is %q, want go mod init example.com/shop (the module testdata/outside is written for)", got)
	}
	makefile, err := os.ReadFile(filepath.Join(filepath.Dir(path), "..", "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	if m := regexp.MustCompile(`(?m)^BUF_VERSION := (\S+)$`).FindSubmatch(makefile); m == nil {
		t.Fatal("the Makefile sets no BUF_VERSION")
	} else if pin := "buf/cmd/buf@" + string(m[1]); !strings.Contains(section, pin) {
		t.Errorf("the Typed stubs section does not install buf as the Makefile pins it (%s)", pin)
	}
	for _, name := range []string{"buf.yaml", "buf.gen.yaml"} {
		if _, ok := steps.files[name]; !ok {
			t.Fatalf("the Typed stubs section has no yaml block starting \"# %s\"", name)
		}
	}
	return steps
}
