package doccheck

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

// otherCommands are the programs a shell block may run that are not this
// repository's: their existence is the user's business.
var otherCommands = map[string]bool{
	"buf": true, "curl": true, "npx": true, "npm": true, "echo": true, "export": true,
	"git": true, "gofmt": true, "benchstat": true, "node": true, "nats-server": true, "kill": true,
	"docker": true, "buildah": true, "kubectl": true, "openssl": true,
}

// CheckShell checks that each command of a sh block, or of each "$ " line
// of a console block, names something that exists.
func (c *Checker) CheckShell(b Block) error {
	var errs []error
	cwd := "."
	var outer []string // the directories of the enclosing shells
	lines := strings.Split(strings.ReplaceAll(b.Body, "\\\n", " "), "\n")
	for i, line := range lines {
		if b.Lang == "console" {
			var ok bool
			if line, ok = strings.CutPrefix(line, "$ "); !ok {
				continue // output
			}
		}
		for _, cmd := range commandsOf(line) {
			switch cmd[0] {
			case "(":
				outer = append(outer, cwd)
				continue
			case ")":
				if len(outer) > 0 {
					cwd, outer = outer[len(outer)-1], outer[:len(outer)-1]
				}
				continue
			}
			if err := c.checkCommand(&cwd, cmd); err != nil {
				errs = append(errs, fmt.Errorf("%s:%d: %s: %w", b.File, b.Line+1+i, strings.Join(cmd, " "), err))
			}
		}
	}
	return errors.Join(errs...)
}

// commandsOf splits a shell line into its simple commands, each a list of
// words with quotes removed, leaving out comments, variable assignments
// before the command, and command substitutions ($(...) becomes "$()").
func commandsOf(line string) [][]string {
	var cmds [][]string
	var cur []string
	var word strings.Builder
	inWord := false
	flushWord := func() {
		if inWord {
			cur = append(cur, word.String())
			word.Reset()
			inWord = false
		}
	}
	flushCmd := func() {
		flushWord()
		for len(cur) > 0 && assignment.MatchString(cur[0]) {
			cur = cur[1:]
		}
		if len(cur) > 0 {
			cmds = append(cmds, cur)
		}
		cur = nil
	}
	for i := 0; i < len(line); i++ {
		ch := line[i]
		switch {
		case ch == '\'' || ch == '"':
			end := strings.IndexByte(line[i+1:], ch)
			if end < 0 {
				end = len(line) - i - 1
			}
			word.WriteString(line[i+1 : i+1+end])
			inWord = true
			i += end + 1
		case ch == '$' && i+1 < len(line) && line[i+1] == '(':
			depth := 0
			for ; i < len(line); i++ {
				if line[i] == '(' {
					depth++
				} else if line[i] == ')' {
					if depth--; depth == 0 {
						break
					}
				}
			}
			word.WriteString("$()")
			inWord = true
		case ch == '#' && !inWord:
			i = len(line)
		case ch == ' ' || ch == '\t':
			flushWord()
		case ch == ';' || ch == '|' || ch == '&':
			flushCmd()
		case ch == '(' || ch == ')': // a subshell: its cd ends with it
			flushCmd()
			cmds = append(cmds, []string{string(ch)})
		default:
			word.WriteByte(ch)
			inWord = true
		}
	}
	flushCmd()
	return cmds
}

var assignment = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)

// checkCommand checks one command run in *cwd (relative to the root),
// which a cd changes.
func (c *Checker) checkCommand(cwd *string, cmd []string) error {
	name, args := cmd[0], cmd[1:]
	switch {
	case name == "cd":
		if len(args) != 1 {
			return fmt.Errorf("cd takes one directory")
		}
		dir := filepath.Join(*cwd, args[0])
		if !c.isDir(dir) {
			return fmt.Errorf("no directory %s", dir)
		}
		*cwd = dir
		return nil
	case name == "go":
		return c.checkGo(*cwd, args)
	case name == "make":
		return c.checkMake(*cwd, args)
	case name == "wizard" || name == "wizard-gateway":
		return c.checkProgram(".", "./cmd/"+name, args)
	case name == "bash" && len(args) > 0:
		return c.checkFile(*cwd, args[0])
	case strings.HasPrefix(name, "./") || strings.HasPrefix(name, ".ci/"):
		return c.checkFile(*cwd, name)
	case otherCommands[name]:
		return nil
	}
	return fmt.Errorf("%s is neither this repository's nor a known program (internal/doccheck's otherCommands)", name)
}

func (c *Checker) isDir(rel string) bool {
	st, err := os.Stat(filepath.Join(c.Root, rel))
	return err == nil && st.IsDir()
}

func (c *Checker) checkFile(cwd, rel string) error {
	if _, err := os.Stat(filepath.Join(c.Root, cwd, rel)); err != nil {
		return fmt.Errorf("no file %s", filepath.Join(cwd, rel))
	}
	return nil
}

// checkGo checks a go command: local packages exist; go run's program
// takes the flags given.
func (c *Checker) checkGo(cwd string, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("go without a subcommand")
	}
	sub, args := args[0], args[1:]
	switch sub {
	case "run":
		for i, a := range args {
			if strings.HasPrefix(a, "-") {
				continue
			}
			if !strings.HasPrefix(a, ".") {
				return fmt.Errorf("go run %s: the docs run local packages (./...)", a)
			}
			return c.checkProgram(cwd, a, args[i+1:])
		}
		return fmt.Errorf("go run without a package")
	case "test", "build", "vet", "install", "list":
		for _, a := range args {
			if !strings.HasPrefix(a, "./") || strings.Contains(a, "<") {
				continue // a flag or its value, a remote package, a placeholder
			}
			dir := strings.TrimSuffix(strings.TrimSuffix(a, "..."), "/")
			if !c.isDir(filepath.Join(cwd, dir)) {
				return fmt.Errorf("no package directory %s", filepath.Join(cwd, dir))
			}
		}
		return nil
	case "get", "mod", "tool", "env", "version", "generate":
		return nil
	}
	return fmt.Errorf("go %s: not a go command the docs use", sub)
}

var makeTarget = regexp.MustCompile(`(?m)^([a-z][a-z0-9-]*):`)

func (c *Checker) checkMake(cwd string, args []string) error {
	dir := cwd
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-C" && i+1 < len(args):
			dir = filepath.Join(dir, args[i+1])
			i++
		case strings.HasPrefix(a, "-") || strings.Contains(a, "="):
		default:
			mk, err := os.ReadFile(filepath.Join(c.Root, dir, "Makefile"))
			if err != nil {
				return err
			}
			found := false
			for _, m := range makeTarget.FindAllStringSubmatch(string(mk), -1) {
				found = found || m[1] == a
			}
			if !found {
				return fmt.Errorf("%s/Makefile has no target %s", dir, a)
			}
		}
	}
	return nil
}

// checkProgram checks that the main package pkg (relative to cwd, in the
// module there) exists and that its help lists every flag of args; for
// wizard, the subcommand's help.
func (c *Checker) checkProgram(cwd, pkg string, args []string) error {
	dir := filepath.Join(cwd, pkg)
	if !c.isDir(dir) {
		return fmt.Errorf("no package directory %s", dir)
	}
	helpArgs := []string{"-h"}
	if filepath.Base(dir) == "wizard" && len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		helpArgs = []string{"help", args[0]}
	}
	help, err := c.help(cwd, pkg, helpArgs)
	if err != nil {
		return err
	}
	for _, a := range args {
		if !strings.HasPrefix(a, "-") || a == "-" {
			continue
		}
		flag, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !regexp.MustCompile(`(^|[\s,])--?` + regexp.QuoteMeta(flag) + `([\s=,]|$)`).MatchString(help) {
			return fmt.Errorf("%s %s does not list the flag %s", filepath.Base(dir), strings.Join(helpArgs, " "), a)
		}
	}
	return nil
}

// help builds the program (once) and returns what helpArgs print. A
// wizard subcommand that does not exist fails.
func (c *Checker) help(cwd, pkg string, helpArgs []string) (string, error) {
	bin, err := c.build(cwd, pkg)
	if err != nil {
		return "", err
	}
	var out bytes.Buffer
	cmd := exec.Command(bin, helpArgs...)
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	var exit *exec.ExitError
	if err != nil && !(errors.As(err, &exit) && helpArgs[0] == "-h") {
		return "", fmt.Errorf("%s %s: %v\n%s", filepath.Base(pkg), strings.Join(helpArgs, " "), err, out.String())
	}
	return out.String(), nil
}

func (c *Checker) build(cwd, pkg string) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := filepath.Join(cwd, pkg)
	if bin, ok := c.bins[key]; ok {
		return bin, nil
	}
	if c.binDir == "" {
		d, err := os.MkdirTemp("", "doccheck")
		if err != nil {
			return "", err
		}
		c.binDir, c.bins = d, map[string]string{}
	}
	bin := filepath.Join(c.binDir, fmt.Sprintf("prog%d", len(c.bins)))
	cmd := exec.Command("go", "build", "-o", bin, pkg)
	cmd.Dir = filepath.Join(c.Root, cwd)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %v\n%s", key, err, out)
	}
	c.bins[key] = bin
	return bin, nil
}

// Close removes the programs the checker built.
func (c *Checker) Close() error {
	if c.binDir == "" {
		return nil
	}
	return os.RemoveAll(c.binDir)
}
