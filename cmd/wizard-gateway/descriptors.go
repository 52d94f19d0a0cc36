package main

import (
	"errors"
	"fmt"
	"os"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
)

// loadDescriptors registers the message types of a FileDescriptorSet
// file (buf build -o FILE, or protoc --include_imports
// --descriptor_set_out=FILE), so that the gateway can turn the protobuf
// answers of typed handlers into JSON: a stock binary links none of the
// services' types. Types the binary has already are kept. It returns how
// many types it registered.
func loadDescriptors(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	var set descriptorpb.FileDescriptorSet
	if err := proto.Unmarshal(b, &set); err != nil {
		return 0, fmt.Errorf("%s: not a FileDescriptorSet: %w", path, err)
	}
	local := new(protoregistry.Files)
	res := resolver{local}
	n := 0
	for _, fdp := range set.File {
		if _, err := protoregistry.GlobalFiles.FindFileByPath(fdp.GetName()); err == nil {
			continue // linked in: its types are registered
		}
		fd, err := protodesc.NewFile(fdp, res)
		if err != nil {
			return n, fmt.Errorf("%s: %s: %w", path, fdp.GetName(), err)
		}
		if err := local.RegisterFile(fd); err != nil {
			return n, fmt.Errorf("%s: %s: %w", path, fdp.GetName(), err)
		}
		n += registerMessages(fd.Messages())
	}
	return n, nil
}

// registerMessages registers msgs and their nested messages as dynamic
// types, skipping names already registered.
func registerMessages(msgs protoreflect.MessageDescriptors) int {
	n := 0
	for i := range msgs.Len() {
		md := msgs.Get(i)
		if md.IsMapEntry() {
			continue
		}
		if _, err := protoregistry.GlobalTypes.FindMessageByName(md.FullName()); errors.Is(err, protoregistry.NotFound) {
			if protoregistry.GlobalTypes.RegisterMessage(dynamicpb.NewMessageType(md)) == nil {
				n++
			}
		}
		n += registerMessages(md.Messages())
	}
	return n
}

// resolver finds imports among the set's files first, then the linked
// ones (google/protobuf/*, wizard's options).
type resolver struct{ local *protoregistry.Files }

func (r resolver) FindFileByPath(p string) (protoreflect.FileDescriptor, error) {
	if fd, err := r.local.FindFileByPath(p); err == nil {
		return fd, nil
	}
	return protoregistry.GlobalFiles.FindFileByPath(p)
}

func (r resolver) FindDescriptorByName(name protoreflect.FullName) (protoreflect.Descriptor, error) {
	if d, err := r.local.FindDescriptorByName(name); err == nil {
		return d, nil
	}
	return protoregistry.GlobalFiles.FindDescriptorByName(name)
}
