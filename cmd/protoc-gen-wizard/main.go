package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/pluginpb"

	"github.com/wizardmesh/wizard/runtime"
)

func main() {
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), `usage: protoc-gen-wizard [--version] [--write-options DIR]

protoc-gen-wizard is a protoc plugin: buf or protoc run it with a
CodeGeneratorRequest on standard input. See buf.gen.yaml.
--write-options DIR writes DIR/wizard/v1/options.proto, the options this
version of the plugin reads, for .proto files to import.
`)
		flag.PrintDefaults()
	}
	version := flag.Bool("version", false, "print the version and exit")
	options := flag.String("write-options", "", "write `DIR`/"+optionsPath+" and exit")
	flag.Parse()
	if *version {
		fmt.Println("protoc-gen-wizard v" + runtime.Version)
		return
	}
	if *options != "" {
		if flag.NArg() > 0 {
			flag.Usage()
			os.Exit(2)
		}
		if _, err := writeOptions(*options); err != nil {
			fmt.Fprintln(os.Stderr, "protoc-gen-wizard:", err)
			os.Exit(1)
		}
		return
	}
	if flag.NArg() > 0 {
		flag.Usage()
		os.Exit(2)
	}
	if err := serve(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "protoc-gen-wizard:", err)
		os.Exit(1)
	}
}

// serve reads a CodeGeneratorRequest from r and writes the response to w.
// Problems in the .proto files go into the response; an error here means
// the plugin could not talk to its caller.
func serve(r io.Reader, w io.Writer) error {
	in, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	req := new(pluginpb.CodeGeneratorRequest)
	if err := proto.Unmarshal(in, req); err != nil {
		return fmt.Errorf("reading the CodeGeneratorRequest: %w", err)
	}
	out, err := proto.Marshal(run(req))
	if err != nil {
		return err
	}
	_, err = w.Write(out)
	return err
}
