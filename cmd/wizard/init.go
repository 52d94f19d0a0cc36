package main

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// initCommand is 'wizard init', listed in [commands].
var initCommand = &command{
	name: "init",
	args: "[DIR]",
	summary: `Scaffold a Go module that serves a typed wizard contract, as docs/codegen.md's
"Typed stubs" section builds one: buf.yaml and buf.gen.yaml, an annotated
contract under proto/, a main.go that serves it, then (with the go tool on
PATH) go mod init, go get -tool of protoc-gen-wizard and protoc-gen-go, and
go tool protoc-gen-wizard -write-options proto (the options proto where buf
finds it). What is left: buf generate, go mod tidy, go build. DIR (default:
the current directory) may exist; a file init would write must not. When a
step fails, init removes what it made.`,
	example: `wizard init --module example.com/hello hello
cd hello && buf generate && go mod tidy && go build -o bin/ ./... && bin/hello`,
	flags: addInitFlags,
	run:   runInit,
}

type initFlags struct {
	module, replace string
	noGo            bool
}

func addInitFlags(fs *flag.FlagSet) any {
	f := &initFlags{}
	fs.StringVar(&f.module, "module", "", `module path (default "example.com/" and DIR's name)`)
	fs.BoolVar(&f.noGo, "no-go", false, "write the files only; run none of the go steps")
	fs.StringVar(&f.replace, "replace", "", "use the wizard checkout in this directory instead of a published version (go mod edit -replace)")
	return f
}

var modulePath = regexp.MustCompile(`^[a-z0-9.-]+(/[A-Za-z0-9._~-]+)*$`)

func runInit(ctx context.Context, c *cli, args []string, own any) error {
	f := own.(*initFlags)
	if err := wantArgs("init", args, 0, 1, ""); err != nil {
		return err
	}
	dir := "."
	if len(args) == 1 {
		dir = args[0]
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	mod := f.module
	if mod == "" {
		mod = "example.com/" + strings.ToLower(regexp.MustCompile(`[^A-Za-z0-9._-]`).ReplaceAllString(filepath.Base(abs), "-"))
	}
	if !modulePath.MatchString(mod) {
		return usagef("--module %q: not a module path (e.g. example.com/hello)", mod)
	}
	files := scaffold(mod)
	for name := range files {
		if _, err := os.Stat(filepath.Join(abs, name)); err == nil {
			return usagef("DIR %s: %s exists already; init writes only new files", dir, name)
		}
	}
	if _, err := os.Stat(filepath.Join(abs, "go.mod")); err == nil && !f.noGo {
		return usagef("DIR %s: go.mod exists already; give --no-go to write the other files only", dir)
	}
	steps := [][]string{{"go", "mod", "init", mod}}
	if f.replace != "" {
		r, err := filepath.Abs(f.replace)
		if err != nil {
			return err
		}
		steps = append(steps, []string{"go", "mod", "edit", "-replace", "github.com/wizardmesh/wizard=" + r})
	}
	steps = append(steps,
		[]string{"go", "get", "-tool", "github.com/wizardmesh/wizard/cmd/protoc-gen-wizard"},
		[]string{"go", "get", "-tool", "google.golang.org/protobuf/cmd/protoc-gen-go"},
		[]string{"go", "tool", "protoc-gen-wizard", "-write-options", "proto"})
	// A step that fails takes back what init made: no half-made module.
	var u undo
	if err := u.mkdirAll(abs); err != nil {
		return err
	}
	if !f.noGo {
		u.expect(filepath.Join(abs, "go.mod"), filepath.Join(abs, "go.sum"), filepath.Join(abs, "proto", "wizard"))
	}
	if err := writeScaffold(ctx, c, &u, abs, dir, files, steps, f.noGo); err != nil {
		u.rollback()
		return fmt.Errorf("%w\n(init removed what it had made)", err)
	}
	if c.json {
		c.printJSON(map[string]any{"dir": abs, "module": mod})
		return nil
	}
	c.printf("\nnext, in %s:\n  buf generate\n  go mod tidy\n  go build -o bin/ ./...\n  bin/%s\n", dir, filepath.Base(mod))
	return nil
}

// writeScaffold writes files under abs (dir as the user named it), then
// runs the go steps, or prints them with noGo.
func writeScaffold(ctx context.Context, c *cli, u *undo, abs, dir string, files map[string]string, steps [][]string, noGo bool) error {
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if err := u.writeFile(filepath.Join(abs, name), []byte(files[name])); err != nil {
			return err
		}
		if !c.json {
			c.printf("wrote %s\n", filepath.Join(dir, name))
		}
	}
	if noGo {
		c.printf("then, in %s:\n", dir)
		for _, s := range steps {
			c.printf("  %s\n", strings.Join(s, " "))
		}
		return nil
	}
	for _, s := range steps {
		if !c.json {
			c.printf("$ %s\n", strings.Join(s, " "))
		}
		cmd := exec.CommandContext(ctx, s[0], s[1:]...)
		cmd.Dir = abs
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %v\n%s", strings.Join(s, " "), err, out)
		}
	}
	return nil
}

// scaffold is the files of a new module mod, by path.
func scaffold(mod string) map[string]string {
	return map[string]string{
		"buf.yaml": `# buf.yaml
version: v2
modules:
  - path: proto
`,
		"buf.gen.yaml": `# buf.gen.yaml
version: v2
inputs:
  - directory: proto
    exclude_paths: [proto/wizard] # imported, not generated: its Go code is wizard's runtime/wizardpb
plugins:
  - local: ["go", "tool", "protoc-gen-go"]
    out: .
    opt: module=` + mod + `
  - local: ["go", "tool", "protoc-gen-wizard"]
    out: .
    opt: module=` + mod + `
    strategy: all # one run over every package: a pattern two packages share fails generation
`,
		"proto/greet/v1/greet.proto": `syntax = "proto3";

package greet.v1;

import "wizard/v1/options.proto";

option go_package = "` + mod + `/gen/greet/v1;greetv1";

// GreetService greets. Its methods are routed by pattern: the service's
// pattern plus cmd:<method name in snake case>, unless a method says
// otherwise.
service GreetService {
  option (wizard.v1.service) = {pattern: "role:greet"};
  // Hello is routed by role:greet,cmd:hello.
  rpc Hello(HelloRequest) returns (HelloResponse);
  // Shout is routed by role:greet,cmd:shout, and times out after 1s.
  rpc Shout(HelloRequest) returns (HelloResponse) {
    option (wizard.v1.method) = {pattern: "cmd:shout", timeout: {seconds: 1}};
  }
}

// HelloRequest names whom to greet.
message HelloRequest {
  string name = 1;
}

// HelloResponse is the greeting.
message HelloResponse {
  string greeting = 1;
}
`,
		"main.go": `// Command ` + mainName(mod) + ` serves greet.v1.GreetService over TCP on 127.0.0.1
// until interrupted. Call it from the shell:
//
//	wizard act --peers ADDR role:greet,cmd:hello name:ada
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"

	greetv1 "` + mod + `/gen/greet/v1"
	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/tcp"
)

type greeter struct {
	greetv1.UnimplementedGreetServiceHandler
}

func (greeter) Hello(_ context.Context, req *greetv1.HelloRequest) (*greetv1.HelloResponse, error) {
	return &greetv1.HelloResponse{Greeting: "hello, " + req.GetName()}, nil
}

func (greeter) Shout(_ context.Context, req *greetv1.HelloRequest) (*greetv1.HelloResponse, error) {
	return &greetv1.HelloResponse{Greeting: strings.ToUpper("hello, " + req.GetName() + "!")}, nil
}

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to serve on (port 0 picks one)")
	flag.Parse()
	if err := run(*listen); err != nil {
		fmt.Fprintln(os.Stderr, "` + mainName(mod) + `:", err)
		os.Exit(1)
	}
}

func run(listen string) error {
	tr, err := tcp.New()
	if err != nil {
		return err
	}
	node, err := runtime.New(runtime.WithTransport(tr), runtime.WithListen(listen))
	if err != nil {
		return err
	}
	defer node.Close()
	if err := greetv1.RegisterGreetServiceHandler(node, greeter{}); err != nil {
		return err
	}
	fmt.Printf("serving on %s; try: wizard act --peers %s role:greet,cmd:hello name:ada\n", node.Addr(), node.Addr())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	<-ctx.Done()
	return nil
}
`,
	}
}

func mainName(mod string) string { return filepath.Base(mod) }
