package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/tcp"
)

// answerFile is a .proto the test binary does not link: package gwtest,
// message Answer {string text = 1;}.
func answerFile() *descriptorpb.FileDescriptorProto {
	return &descriptorpb.FileDescriptorProto{
		Name: proto.String("gwtest/answer.proto"), Package: proto.String("gwtest"), Syntax: proto.String("proto3"),
		MessageType: []*descriptorpb.DescriptorProto{{
			Name: proto.String("Answer"),
			Field: []*descriptorpb.FieldDescriptorProto{{
				Name: proto.String("text"), JsonName: proto.String("text"), Number: proto.Int32(1),
				Type: descriptorpb.FieldDescriptorProto_TYPE_STRING.Enum(), Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(),
			}},
		}},
	}
}

// TestDescriptors: with --descriptors, a typed handler's protobuf answer
// of a type the binary does not link reaches the client as JSON.
func TestDescriptors(t *testing.T) {
	dir := t.TempDir()
	set := filepath.Join(dir, "set.binpb")
	b, _ := proto.Marshal(&descriptorpb.FileDescriptorSet{File: []*descriptorpb.FileDescriptorProto{answerFile()}})
	os.WriteFile(set, b, 0o600)
	if _, err := loadDescriptors(filepath.Join(dir, "missing")); err == nil {
		t.Error("a missing file: no error")
	}
	os.WriteFile(filepath.Join(dir, "bad"), []byte("not protobuf"), 0o600)
	if _, err := loadDescriptors(filepath.Join(dir, "bad")); err == nil {
		t.Error("a bad file: no error")
	}

	// The service builds its answers from its own copy of the descriptor.
	fd, err := protodesc.NewFile(answerFile(), protoregistry.GlobalFiles)
	if err != nil {
		t.Fatal(err)
	}
	md := fd.Messages().ByName("Answer")
	tr, _ := tcp.New(tcp.WithLogger(slog.New(slog.DiscardHandler)))
	svc, err := runtime.New(runtime.WithTransport(tr), runtime.WithListen("127.0.0.1:0"), runtime.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	svc.Add("role:t,cmd:typed", func(ctx context.Context, req runtime.Request) (any, error) {
		m := dynamicpb.NewMessage(md)
		m.Set(md.Fields().ByName("text"), protoreflectString("hi"))
		return m, nil
	})
	cfgFile := filepath.Join(dir, "gateway.yaml")
	os.WriteFile(cfgFile, []byte("routes:\n  - {method: GET, path: /typed, pattern: \"role:t,cmd:typed\"}\n"), 0o600)
	sigs := make(chan os.Signal, 1)
	addrs := make(chan string, 1)
	done := make(chan int, 1)
	var stderr syncBuffer
	go func() {
		done <- run([]string{"-c", cfgFile, "-i", "127.0.0.1", "-p", "0", "--listen-mesh", "127.0.0.1:0", "--peers", svc.Addr(), "--descriptors", set}, noEnv, io.Discard, &stderr, sigs, func(a string) { addrs <- a })
	}()
	var base string
	select {
	case a := <-addrs:
		base = "http://" + a
	case code := <-done:
		t.Fatalf("exited %d: %s", code, stderr.String())
	case <-time.After(guard):
		t.Fatal("never served")
	}
	var body string
	until(t, "GET /typed answers 200", func() bool {
		res, err := http.Get(base + "/typed")
		if err != nil {
			return false
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		body = string(b)
		return res.StatusCode == 200
	})
	if strings.ReplaceAll(body, " ", "") != `{"text":"hi"}` {
		t.Errorf("body %s", body)
	}
	sigs <- syscall.SIGTERM
	if code := <-done; code != 0 {
		t.Errorf("exit %d: %s", code, stderr.String())
	}
}

func protoreflectString(s string) protoreflect.Value { return protoreflect.ValueOfString(s) }
