package gateway

import (
	"strings"
	"testing"

	"github.com/wizardmesh/wizard/gateway/config"
	"github.com/wizardmesh/wizard/runtime"
)

func TestNewErrors(t *testing.T) {
	node, err := runtime.New(runtime.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	cfg, err := config.Parse("g.yaml", []byte("routes:\n  - {method: GET, path: /a, pattern: \"role:a\"}\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		new  func() (*Gateway, error)
		want string
	}{
		{"nil node", func() (*Gateway, error) { return New(nil, cfg) }, "node cannot be nil"},
		{"nil config", func() (*Gateway, error) { return New(node, nil) }, "nil or unparsed configuration"},
		{"nil option", func() (*Gateway, error) { return New(node, cfg, nil) }, "nil Option"},
		{"nil logger", func() (*Gateway, error) { return New(node, cfg, WithLogger(nil)) }, "WithLogger(nil)"},
		{"nil verifier", func() (*Gateway, error) { return New(node, cfg, WithVerifier(nil)) }, "WithVerifier(nil)"},
		{"half TLS", func() (*Gateway, error) { return New(node, cfg, WithTLSFiles("cert.pem", "")) }, "both the certificate and the key"},
		{"negative grace", func() (*Gateway, error) { return New(node, cfg, WithShutdownGrace(-1)) }, "cannot be negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := tc.new()
			if err == nil {
				g.Close()
				t.Fatal("no error")
			}
			if !strings.HasPrefix(err.Error(), "wizard: gateway: ") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want one containing %q", err, tc.want)
			}
		})
	}
	g, err := New(node, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Close(); err != nil {
		t.Error(err)
	}
	if err := g.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
	if _, err := g.Reload(nil); err == nil {
		t.Error("Reload(nil): no error")
	}
}
