package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/pluginpb"

	"github.com/wizardmesh/wizard/runtime"
)

// TestMain lets tests run the command's main in a subprocess: the test
// binary itself, with PROTOC_GEN_WIZARD_MAIN set.
func TestMain(m *testing.M) {
	if os.Getenv("PROTOC_GEN_WIZARD_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func runMain(t *testing.T, stdin []byte, args ...string) (stdout []byte, err error) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "PROTOC_GEN_WIZARD_MAIN=1")
	cmd.Stdin = bytes.NewReader(stdin)
	return cmd.Output()
}

func TestVersionFlag(t *testing.T) {
	out, err := runMain(t, nil, "--version")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(out), "protoc-gen-wizard v"+runtime.Version+"\n"; got != want {
		t.Errorf("--version printed %q, want %q", got, want)
	}
}

// TestMainProtocol runs the command as buf does: a request on stdin, a
// response on stdout.
func TestMainProtocol(t *testing.T) {
	req, err := proto.Marshal(caseRequest(t, filepath.Join(testdata, "basic"), "paths=source_relative"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := runMain(t, req)
	if err != nil {
		t.Fatal(err)
	}
	var res pluginpb.CodeGeneratorResponse
	if err := proto.Unmarshal(out, &res); err != nil {
		t.Fatal(err)
	}
	if res.Error != nil || len(res.File) != 1 || res.File[0].GetName() != "input_wizard.pb.go" {
		t.Fatalf("response: error %q, %d files", res.GetError(), len(res.File))
	}
	if res.GetSupportedFeatures()&uint64(pluginpb.CodeGeneratorResponse_FEATURE_PROTO3_OPTIONAL) == 0 {
		t.Error("the plugin does not declare proto3 optional support")
	}
}

func TestServeBadInput(t *testing.T) {
	var out bytes.Buffer
	if err := serve(strings.NewReader("\xff not a request"), &out); err == nil {
		t.Error("serve accepted a malformed request")
	}
}

func TestUnknownParameter(t *testing.T) {
	res := run(caseRequest(t, filepath.Join(testdata, "basic"), "paths=source_relative,colour=blue"))
	if !strings.Contains(res.GetError(), "unknown parameter colour") {
		t.Errorf("error %q, want it to name the unknown parameter", res.GetError())
	}
}
