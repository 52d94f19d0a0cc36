package main

import (
	"fmt"
	"strconv"
	"strings"

	"google.golang.org/protobuf/compiler/protogen"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/wizardmesh/wizard/runtime/pattern"
	"github.com/wizardmesh/wizard/runtime/wizardpb"
)

// event is a message annotated with (wizard.v1.event), validated.
type event struct {
	file       *protogen.File
	msg        *protogen.Message
	written    string // the pattern as written
	canonical  string
	full       pattern.Pattern
	deprecated bool
}

// reservedGroupKey is the key the runtime adds to a subscription's pattern
// for its group, which Subscribe refuses in patterns it is given.
const reservedGroupKey = "wizard.group"

// events returns the event messages of f, nested ones included, in source
// order, validated.
func events(f *protogen.File, ps *problems) []*event {
	var out []*event
	var walk func([]*protogen.Message)
	walk = func(ms []*protogen.Message) {
		for _, m := range ms {
			if m.Desc.IsMapEntry() {
				continue
			}
			if ev := newEvent(f, m, ps); ev != nil {
				out = append(out, ev)
			}
			walk(m.Messages)
		}
	}
	walk(f.Messages)
	return out
}

// newEvent validates m's (wizard.v1.event) option; it returns nil when m
// has none, or after reporting why m cannot be generated.
func newEvent(f *protogen.File, m *protogen.Message, ps *problems) *event {
	mopts, _ := m.Desc.Options().(*descriptorpb.MessageOptions)
	if mopts == nil || !proto.HasExtension(mopts, wizardpb.E_Event) {
		return nil
	}
	eo := proto.GetExtension(mopts, wizardpb.E_Event).(*wizardpb.EventOptions)
	ev := &event{file: f, msg: m, written: eo.GetPattern(), deprecated: mopts.GetDeprecated()}
	d := m.Desc
	p, err := pattern.Parse(ev.written)
	switch {
	case err != nil:
		ps.add(d, "bad pattern in option (wizard.v1.event) %s", parseProblem(err))
	case p.Len() == 0:
		ps.add(d, "option (wizard.v1.event) has an empty pattern, which would match every event; give the event a pattern such as \"role:<service>,event:<name>\"")
	case p.HasGlob():
		ps.add(d, "pattern %q in option (wizard.v1.event) holds a glob (* or ?); the generated helpers emit their pattern literally and subscribe to it alone, so it cannot hold globs", ev.written)
	case len(metaKeys(ev.written)) > 0:
		ps.add(d, "pattern %q in option (wizard.v1.event) holds %s; %s", ev.written, metaKeyList(metaKeys(ev.written)), metaKeyReason)
	case has(p, reservedGroupKey):
		ps.add(d, "pattern %q in option (wizard.v1.event) holds the key %s, which the runtime keeps for subscriptions' groups; remove it", ev.written, reservedGroupKey)
	case value(p, "sys") == "wizard":
		ps.add(d, "pattern %q in option (wizard.v1.event) holds sys:wizard, which marks the node's own patterns; use another value", ev.written)
	default:
		for _, pr := range p.Pairs() {
			if routingField(m, pr.Key) {
				ps.add(d, "field %q has the name of a key of the pattern %q in option (wizard.v1.event); a set field joins the event's pairs, and the emit fails when it holds another value than %q: rename the field, or drop the key from the pattern", pr.Key, ev.written, pr.Value)
			}
		}
		ev.full = p
		ev.canonical = p.String()
		return ev
	}
	return nil
}

// routingField reports whether m has a field named key whose value joins
// an emitted event's pairs: a singular scalar (the runtime adds those a
// message sets to the pattern it is emitted on).
func routingField(m *protogen.Message, key string) bool {
	fd := m.Desc.Fields().ByName(protoreflect.Name(key))
	return fd != nil && !fd.IsList() && !fd.IsMap() && routable(fd.Kind())
}

func has(p pattern.Pattern, key string) bool {
	_, ok := p.Get(key)
	return ok
}

func value(p pattern.Pattern, key string) string {
	v, _ := p.Get(key)
	return v
}

// checkEventOverlaps reports events generated together whose patterns
// overlap. A subscription receives every event whose pairs include all of
// its own, and an event's pairs are its pattern's plus the singular scalar
// fields its message sets. So OnA receives B's messages, of another type,
// and fails on each, when every pair of A's pattern is in B's pattern or
// could come from a field of B; and two events with the same pattern reach
// each other's subscribers.
func checkEventOverlaps(evs []*event, ps *problems) {
	for i, a := range evs {
		var wider []string
		for j, b := range evs {
			if i == j {
				continue
			}
			fields, ok := reaches(a, b)
			switch {
			case !ok:
			case a.canonical == b.canonical:
				if j < i {
					ps.add(a.msg.Desc, "event pattern %q is also the pattern of event %s (%s); events generated together need distinct patterns", a.canonical, b.msg.Desc.FullName(), position(b.msg.Desc))
				}
			case len(fields) == 0:
				wider = append(wider, fmt.Sprintf("%s %q (%s)", b.msg.Desc.FullName(), b.canonical, position(b.msg.Desc)))
			default:
				wider = append(wider, fmt.Sprintf("%s %q (%s) with its field %s set to the pattern's value", b.msg.Desc.FullName(), b.canonical, position(b.msg.Desc), strings.Join(fields, ", ")))
			}
		}
		if len(wider) > 0 {
			ps.add(a.msg.Desc, "every pair of event pattern %q is in the pairs of event %s, so %s would receive those events too, of another type; add a pair to %s's pattern that they lack",
				a.canonical, strings.Join(wider, "; "), eventNamesOf(a).on, a.msg.GoIdent.GoName)
		}
	}
}

// reaches reports whether a subscription to a's pattern can receive b's
// events: whether every pair of a's pattern is in b's, or its key is not
// in b's pattern and names a field of b that can supply it. fields lists
// those fields. Neither pattern holds globs.
func reaches(a, b *event) (fields []string, ok bool) {
	for _, pr := range a.full.Pairs() {
		v, in := b.full.Get(pr.Key)
		switch {
		case in && v == pr.Value:
		case !in && routingField(b.msg, pr.Key):
			fields = append(fields, strconv.Quote(pr.Key))
		default:
			return nil, false
		}
	}
	return fields, true
}

// eventNames are the Go names generated for one event.
type eventNames struct {
	pattern, emit, broadcast, on string
}

func eventNamesOf(ev *event) eventNames {
	m := ev.msg.GoIdent.GoName
	return eventNames{
		pattern:   m + "EventPattern",
		emit:      "Emit" + m,
		broadcast: "Broadcast" + m,
		on:        "On" + m,
	}
}

// generateEvent writes the pattern constant and the typed helpers of ev.
func generateEvent(g *protogen.GeneratedFile, ev *event) {
	n := eventNamesOf(ev)
	rt := func(name string) string { return g.QualifiedGoIdent(runtimePackage.Ident(name)) }
	ctx := g.QualifiedGoIdent(contextPackage.Ident("Context"))
	msg := g.QualifiedGoIdent(ev.msg.GoIdent)
	full := string(ev.msg.Desc.FullName())
	deprecation := func() {
		if ev.deprecated {
			g.P("//")
			doc(g, "Deprecated: "+full+" is marked as deprecated in "+ev.msg.Desc.ParentFile().Path()+".")
		}
	}

	doc(g, n.pattern+" is the pattern of the event "+full+", in canonical form; written "+strconv.Quote(ev.written)+".")
	deprecation()
	g.P("const ", n.pattern, " = ", strconv.Quote(ev.canonical))
	g.P()

	for _, v := range []struct{ name, method, what string }{
		{n.emit, "Emit", "to one member of every group with a matching subscription ([" + rt("Node") + ".Emit])"},
		{n.broadcast, "Broadcast", "to every node with a matching subscription ([" + rt("Node") + ".Broadcast])"},
	} {
		doc(g, v.name+" emits m on "+n.pattern+" through n, "+v.what+", and reports who took it. A nil node is an error.")
		deprecation()
		g.P("func ", v.name, "(ctx ", ctx, ", n *", rt("Node"), ", m *", msg, ", opts ...", rt("CallOption"), ") (", rt("Delivery"), ", error) {")
		g.P("if n == nil {")
		g.P("return ", rt("Delivery"), "{}, ", rt("Errorf"), "(", rt("CodeInvalidArgument"), `, "wizard: `, v.name, `: nil node")`)
		g.P("}")
		g.P("return n.", v.method, "(ctx, ", n.pattern, ", m, opts...)")
		g.P("}")
		g.P()
	}

	doc(g, n.on+" subscribes fn to the events on "+n.pattern+" in group (\"\" for the node's service), through ["+rt("Node")+".Subscribe] with opts. fn gets each event decoded into a *"+ev.msg.GoIdent.GoName+", which it must not modify (local subscribers may share it); its error is reported to the emitter. A nil node or fn is an error.")
	deprecation()
	empty := g.QualifiedGoIdent(emptyPackage.Ident("Empty"))
	g.P("func ", n.on, "(n *", rt("Node"), ", group string, fn func(", ctx, ", *", msg, ") error, opts ...", rt("HandlerOption"), ") error {")
	g.P("if n == nil || fn == nil {")
	g.P("return ", rt("Errorf"), "(", rt("CodeInvalidArgument"), `, "wizard: `, n.on, `: nil node or function")`)
	g.P("}")
	g.P("h := ", rt("NewUnaryHandler"), "(func(ctx ", ctx, ", m *", msg, ") (*", empty, ", error) {")
	g.P("return nil, fn(ctx, m)")
	g.P("})")
	g.P("return n.Subscribe(", n.pattern, ", group, h, opts...)")
	g.P("}")
}

// emptyPackage holds google.protobuf.Empty, the answer of an event's
// handler, which the runtime drops.
const emptyPackage = protogen.GoImportPath("google.golang.org/protobuf/types/known/emptypb")
