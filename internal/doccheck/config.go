package doccheck

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/goccy/go-yaml"
	natsconf "github.com/nats-io/nats-server/v2/conf"

	"github.com/wizardmesh/wizard/gateway/config"
)

// CheckYAML loads a gateway configuration through the gateway's own
// parser; buf's files ("# buf.yaml", "# buf.gen.yaml" on the first line)
// only parse as YAML.
func CheckYAML(b Block) error {
	first, _, _ := strings.Cut(b.Body, "\n")
	if first == "# buf.yaml" || first == "# buf.gen.yaml" {
		var v any
		if err := yaml.Unmarshal([]byte(b.Body), &v); err != nil {
			return fmt.Errorf("%s: %v", b, err)
		}
		return nil
	}
	if _, err := config.Parse(fmt.Sprintf("%s:%d", b.File, b.Line), []byte(b.Body)); err != nil {
		return fmt.Errorf("%s: the gateway does not load it: %v", b, err)
	}
	return nil
}

var varRef = regexp.MustCompile(`\$[A-Za-z_][A-Za-z0-9_]*`)

// CheckNATSConf parses a nats-server configuration, its variables
// ($NAME) set.
func CheckNATSConf(b Block) error {
	body := b.Body
	for _, v := range varRef.FindAllString(body, -1) {
		body = strings.ReplaceAll(body, v, `"x"`)
	}
	if _, err := natsconf.Parse(body); err != nil {
		return fmt.Errorf("%s: nats-server does not parse it: %v", b, err)
	}
	return nil
}

// CheckProto builds a .proto file with buf, with proto/ (the wizard
// options) beside it, and generates its stubs with protoc-gen-wizard, which
// checks the patterns its annotations give.
func (c *Checker) CheckProto(b Block, buf string) error {
	dir, err := os.MkdirTemp("", "doccheck-proto")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := os.MkdirAll(filepath.Join(dir, "doc"), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "doc", "block.proto"), []byte(b.Body), 0o644); err != nil {
		return err
	}
	options, err := os.ReadFile(filepath.Join(c.Root, "proto", "wizard", "v1", "options.proto"))
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(dir, "wiz", "wizard", "v1"), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "wiz", "wizard", "v1", "options.proto"), options, 0o644); err != nil {
		return err
	}
	const cfg = `{"version":"v2","modules":[{"path":"doc"},{"path":"wiz"}]}`
	cmd := exec.Command(buf, "build", "doc", "--config", cfg, "-o", os.DevNull)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: buf build: %v\n%s", b, err, out)
	}
	// Then protoc-gen-wizard, which checks the patterns of the annotations.
	plugin, err := c.build(".", "./cmd/protoc-gen-wizard")
	if err != nil {
		return err
	}
	tmpl := fmt.Sprintf(`{"version":"v2","plugins":[{"local":%q,"out":"gen","opt":["paths=source_relative","Mblock.proto=example.com/doccheck/doc"]}]}`, plugin)
	cmd = exec.Command(buf, "generate", "doc", "--config", cfg, "--template", tmpl)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: protoc-gen-wizard: %v\n%s", b, err, out)
	}
	return nil
}
