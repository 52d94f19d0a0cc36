package main

import (
	"google.golang.org/protobuf/compiler/protogen"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/pluginpb"
)

// run answers one code generation request, as protoc or buf send it: the
// generator as a function, so that tests need no subprocess.
func run(req *pluginpb.CodeGeneratorRequest) *pluginpb.CodeGeneratorResponse {
	gen, err := protogen.Options{ParamFunc: param}.New(req)
	if err != nil {
		return &pluginpb.CodeGeneratorResponse{Error: proto.String(err.Error())}
	}
	gen.SupportedFeatures = uint64(pluginpb.CodeGeneratorResponse_FEATURE_PROTO3_OPTIONAL |
		pluginpb.CodeGeneratorResponse_FEATURE_SUPPORTS_EDITIONS)
	gen.SupportedEditionsMinimum = descriptorpb.Edition_EDITION_PROTO2
	gen.SupportedEditionsMaximum = descriptorpb.Edition_EDITION_2024
	if err := generate(gen); err != nil {
		gen.Error(err)
	}
	return gen.Response()
}

// param rejects the parameters protogen does not handle itself: the
// plugin has none of its own.
func param(name, value string) error {
	return &unknownParam{name}
}

type unknownParam struct{ name string }

func (e *unknownParam) Error() string {
	return "unknown parameter " + e.name + ` (protoc-gen-wizard takes protogen's: paths, module, M<file>=<package>)`
}

// generate writes <file>_wizard.pb.go for every file to generate that holds
// a service with the (wizard.v1.service) option or a message with the
// (wizard.v1.event) option. It writes nothing when a file has a problem,
// and returns all problems, in source order.
func generate(gen *protogen.Plugin) error {
	type output struct {
		f   *protogen.File
		cs  []*contract
		evs []*event
	}
	var (
		ps      problems
		outs    []output
		all     []*contract
		allEvts []*event
	)
	for _, f := range gen.Files {
		if !f.Generate {
			continue
		}
		cs := contracts(f, &ps)
		evs := events(f, &ps)
		if len(cs) > 0 || len(evs) > 0 {
			outs = append(outs, output{f, cs, evs})
			all = append(all, cs...)
			allEvts = append(allEvts, evs...)
		}
	}
	checkCollisions(all, &ps)
	checkEventOverlaps(allEvts, &ps)
	checkNames(gen, all, allEvts, &ps)
	if err := ps.err(); err != nil {
		return err
	}
	for _, o := range outs {
		generateFile(gen, o.f, o.cs, o.evs)
	}
	return nil
}

// checkNames reports generated Go names (of services' stubs and events'
// helpers) that clash with each other or with the names protoc-gen-go
// declares in the same Go package.
func checkNames(gen *protogen.Plugin, cs []*contract, evs []*event, ps *problems) {
	declared := map[protogen.GoImportPath]map[string]string{} // package -> name -> what declares it
	pkgNames := func(p protogen.GoImportPath) map[string]string {
		if m, ok := declared[p]; ok {
			return m
		}
		m := map[string]string{}
		for _, f := range gen.Files {
			if f.GoImportPath != p {
				continue
			}
			m[f.GoDescriptorIdent.GoName] = "the file descriptor of " + f.Desc.Path()
			for _, e := range f.Enums {
				addEnum(m, e)
			}
			for _, msg := range f.Messages {
				addMessage(m, msg)
			}
			for _, x := range f.Extensions {
				m[x.GoIdent.GoName] = "extension " + string(x.Desc.FullName())
			}
		}
		declared[p] = m
		return m
	}
	for _, c := range cs {
		m := pkgNames(c.file.GoImportPath)
		n := namesOf(c)
		names := []string{n.handler, n.unimplemented, n.register, n.client, n.newClient, n.clientImpl}
		for _, op := range c.methods {
			names = append(names, patternName(c, op))
		}
		for _, name := range names {
			if other, ok := m[name]; ok {
				ps.add(c.svc.Desc, "generated Go name %s clashes with %s in Go package %s; rename one of them", name, other, c.file.GoImportPath)
				continue
			}
			m[name] = "the stubs of service " + string(c.svc.Desc.FullName())
		}
	}
	for _, ev := range evs {
		m := pkgNames(ev.file.GoImportPath)
		n := eventNamesOf(ev)
		for _, name := range []string{n.pattern, n.emit, n.broadcast, n.on} {
			if other, ok := m[name]; ok {
				ps.add(ev.msg.Desc, "generated Go name %s of option (wizard.v1.event) clashes with %s in Go package %s; rename one of them", name, other, ev.file.GoImportPath)
				continue
			}
			m[name] = "the helpers of event " + string(ev.msg.Desc.FullName())
		}
	}
}

func addEnum(m map[string]string, e *protogen.Enum) {
	what := "enum " + string(e.Desc.FullName())
	m[e.GoIdent.GoName] = what
	m[e.GoIdent.GoName+"_name"] = what
	m[e.GoIdent.GoName+"_value"] = what
	for _, v := range e.Values {
		m[v.GoIdent.GoName] = "enum value " + string(v.Desc.FullName())
	}
}

func addMessage(m map[string]string, msg *protogen.Message) {
	if msg.Desc.IsMapEntry() {
		return
	}
	m[msg.GoIdent.GoName] = "message " + string(msg.Desc.FullName())
	for _, o := range msg.Oneofs {
		for _, f := range o.Fields {
			m[f.GoIdent.GoName] = "oneof field " + string(f.Desc.FullName())
		}
	}
	for _, e := range msg.Enums {
		addEnum(m, e)
	}
	for _, x := range msg.Extensions {
		m[x.GoIdent.GoName] = "extension " + string(x.Desc.FullName())
	}
	for _, nested := range msg.Messages {
		addMessage(m, nested)
	}
}
