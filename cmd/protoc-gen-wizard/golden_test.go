package main

import (
	"flag"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/pluginpb"
)

var update = flag.Bool("update", false, "rewrite the *.golden files under testdata/")

// testdata is the repository's testdata directory: one directory per case,
// each with input.proto, input.binpb (its descriptor set with source info,
// built by `make generate`) and the goldens: one <generated file>.golden per
// generated file, or error.golden holding the exact error text.
const testdata = "../../testdata"

// caseRequest builds the CodeGeneratorRequest that buf would send for the
// case in dir, from its descriptor set: one generation run of every .proto
// file of the case (input.proto, and others beside it).
func caseRequest(t *testing.T, dir, parameter string) *pluginpb.CodeGeneratorRequest {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "input.binpb"))
	if err != nil {
		t.Fatal(err)
	}
	var set descriptorpb.FileDescriptorSet
	if err := proto.Unmarshal(b, &set); err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.proto"))
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range files {
		files[i] = filepath.Base(f)
	}
	return &pluginpb.CodeGeneratorRequest{
		FileToGenerate: files,
		Parameter:      proto.String(parameter),
		ProtoFile:      set.File,
	}
}

func cases(t *testing.T) []string {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join(testdata, "*", "input.binpb"))
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) == 0 {
		t.Fatal("no cases under " + testdata)
	}
	for i, d := range dirs {
		dirs[i] = filepath.Dir(d)
	}
	return dirs
}

func TestGolden(t *testing.T) {
	for _, dir := range cases(t) {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			res := run(caseRequest(t, dir, "paths=source_relative"))
			got := map[string]string{}
			if res.Error != nil {
				got["error.golden"] = res.GetError() + "\n"
			}
			for _, f := range res.GetFile() {
				got[path.Base(f.GetName())+".golden"] = f.GetContent()
			}
			old, err := filepath.Glob(filepath.Join(dir, "*.golden"))
			if err != nil {
				t.Fatal(err)
			}
			if *update {
				for _, f := range old {
					if err := os.Remove(f); err != nil {
						t.Fatal(err)
					}
				}
				for name, content := range got {
					if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
						t.Fatal(err)
					}
				}
				return
			}
			want := map[string]string{}
			for _, f := range old {
				b, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				want[filepath.Base(f)] = string(b)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("output differs from the goldens (-want +got); rerun with -update if that is intended:\n%s", diff)
			}
			if strings.HasPrefix(filepath.Base(dir), "error_") != (res.Error != nil) {
				t.Errorf("cases named error_* must fail and only they; error: %q", res.GetError())
			}
		})
	}
}

// TestDeterministic generates every case twice and compares.
func TestDeterministic(t *testing.T) {
	for _, dir := range cases(t) {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			a := run(caseRequest(t, dir, "paths=source_relative"))
			b := run(caseRequest(t, dir, "paths=source_relative"))
			if diff := cmp.Diff(a, b, protocmp.Transform()); diff != "" {
				t.Errorf("two runs differ (-first +second):\n%s", diff)
			}
		})
	}
}

// TestVersionCheck: the stubs of a run with a stream method require the
// runtime that has streams (IsAtLeastVersion0_5_0); the others keep
// requiring IsAtLeastVersion0_3_0, so that an older runtime still builds
// them.
func TestVersionCheck(t *testing.T) {
	for _, dir := range cases(t) {
		if strings.HasPrefix(filepath.Base(dir), "error_") {
			continue
		}
		t.Run(filepath.Base(dir), func(t *testing.T) {
			req := caseRequest(t, dir, "paths=source_relative")
			res := run(req)
			for _, f := range res.GetFile() {
				streams := false
				for _, fd := range req.GetProtoFile() {
					if path.Base(fd.GetName()) != strings.TrimSuffix(path.Base(f.GetName()), "_wizard.pb.go")+".proto" {
						continue
					}
					for _, s := range fd.GetService() {
						for _, m := range s.GetMethod() {
							streams = streams || m.GetClientStreaming() || m.GetServerStreaming()
						}
					}
				}
				want := "runtime.IsAtLeastVersion0_3_0"
				if streams {
					want = "runtime.IsAtLeastVersion0_5_0"
				}
				if got := f.GetContent(); !strings.Contains(got, "const _ = "+want+"\n") {
					t.Errorf("%s (streams: %v) does not reference %s", f.GetName(), streams, want)
				}
			}
		})
	}
}
