package main

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/compiler/protogen"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/wizardmesh/wizard/runtime/pattern"
	"github.com/wizardmesh/wizard/runtime/wizardpb"
)

// contract is a service annotated with (wizard.v1.service), validated.
type contract struct {
	file       *protogen.File
	svc        *protogen.Service
	pattern    string // the service pattern as written
	deprecated bool
	methods    []*operation
}

// operation is one method of a contract, validated.
type operation struct {
	m          *protogen.Method
	written    string // the method pattern as written, or the default
	defaulted  bool   // written is the default cmd:<snake_case name>
	canonical  string // service pattern + method pattern, canonical
	full       pattern.Pattern
	mixin      []string
	noReply    bool
	timeout    time.Duration
	idempotent bool
	deprecated bool
	kind       kind
}

// kind is a method's call kind: unary or one of the stream kinds.
type kind int

const (
	unary        kind = iota
	serverStream      // one request, a stream of responses
	clientStream      // a stream of requests, one response
	bidiStream        // both streams at once
)

// kindOf returns the call kind of d.
func kindOf(d protoreflect.MethodDescriptor) kind {
	switch {
	case d.IsStreamingClient() && d.IsStreamingServer():
		return bidiStream
	case d.IsStreamingClient():
		return clientStream
	case d.IsStreamingServer():
		return serverStream
	}
	return unary
}

// isStream reports whether k is a stream kind.
func (k kind) isStream() bool { return k != unary }

func (k kind) String() string {
	switch k {
	case serverStream:
		return "server streaming"
	case clientStream:
		return "client streaming"
	case bidiStream:
		return "bidirectional streaming"
	}
	return "unary"
}

// problem is one reason generation fails, placed in the .proto source.
type problem struct {
	file      string
	line, col int    // 1-based; 0 without source info
	what      string // "method pkg.Service.Method", "service pkg.Service" or "message pkg.Event"
	msg       string
}

func (p problem) Error() string { return p.pos() + ": " + p.what + ": " + p.msg }

func (p problem) pos() string {
	if p.line == 0 {
		return p.file
	}
	return fmt.Sprintf("%s:%d:%d", p.file, p.line, p.col)
}

// problems collects the problems of a generation.
type problems []problem

func (ps *problems) add(d protoreflect.Descriptor, format string, args ...any) {
	p := place(d)
	p.what = "service " + string(d.FullName())
	switch d.(type) {
	case protoreflect.MethodDescriptor:
		p.what = "method " + string(d.FullName())
	case protoreflect.MessageDescriptor:
		p.what = "message " + string(d.FullName())
	}
	p.msg = fmt.Sprintf(format, args...)
	*ps = append(*ps, p)
}

// err returns the problems as one error, a line each, in source order.
func (ps problems) err() error {
	slices.SortStableFunc(ps, func(a, b problem) int {
		return cmp.Or(strings.Compare(a.file, b.file), cmp.Compare(a.line, b.line), cmp.Compare(a.col, b.col))
	})
	errs := make([]error, len(ps))
	for i, p := range ps {
		errs[i] = p
	}
	return errors.Join(errs...)
}

// place returns d's place in its .proto file.
func place(d protoreflect.Descriptor) problem {
	f := d.ParentFile()
	loc := f.SourceLocations().ByDescriptor(d)
	if loc.Path == nil {
		return problem{file: f.Path()}
	}
	return problem{file: f.Path(), line: loc.StartLine + 1, col: loc.StartColumn + 1}
}

// position returns d's place in its .proto file as file:line:col.
func position(d protoreflect.Descriptor) string { return place(d).pos() }

// contracts returns the wizard services of f, validated. Services without
// (wizard.v1.service) are skipped; a method of such a service that carries
// (wizard.v1.method) is a problem, since its options would be ignored.
func contracts(f *protogen.File, ps *problems) []*contract {
	var out []*contract
	for _, s := range f.Services {
		sopts := s.Desc.Options().(*descriptorpb.ServiceOptions)
		if !proto.HasExtension(sopts, wizardpb.E_Service) {
			for _, m := range s.Methods {
				if proto.HasExtension(m.Desc.Options(), wizardpb.E_Method) {
					ps.add(m.Desc, "has option (wizard.v1.method) but its service has no (wizard.v1.service) option, so it would be ignored; add option (wizard.v1.service) = {pattern: \"...\"} to the service")
				}
			}
			continue
		}
		so := proto.GetExtension(sopts, wizardpb.E_Service).(*wizardpb.ServiceOptions)
		c := &contract{file: f, svc: s, pattern: so.GetPattern(), deprecated: sopts.GetDeprecated()}
		base, err := pattern.Parse(c.pattern)
		if err != nil {
			ps.add(s.Desc, "bad service pattern %s", parseProblem(err))
			continue
		}
		if base.HasGlob() {
			ps.add(s.Desc, "service pattern %q holds a glob (* or ?); generated clients call their pattern literally, so it cannot hold globs", c.pattern)
			continue
		}
		if k := metaKeys(c.pattern); len(k) > 0 {
			ps.add(s.Desc, "service pattern %q holds %s; %s", c.pattern, metaKeyList(k), metaKeyReason)
			continue
		}
		for _, m := range s.Methods {
			if op := newOperation(m, base, c.pattern, ps); op != nil {
				c.methods = append(c.methods, op)
			}
		}
		out = append(out, c)
	}
	return out
}

// newOperation validates method m of a service whose pattern is base
// (written in the .proto file as written), or reports why it cannot be
// generated and returns nil.
func newOperation(m *protogen.Method, base pattern.Pattern, written string, ps *problems) *operation {
	d := m.Desc
	mopts := d.Options().(*descriptorpb.MethodOptions)
	mo, _ := proto.GetExtension(mopts, wizardpb.E_Method).(*wizardpb.MethodOptions)
	op := &operation{
		m:          m,
		written:    mo.GetPattern(),
		mixin:      mo.GetMixin(),
		noReply:    mo.GetNoReply(),
		deprecated: mopts.GetDeprecated(),
		kind:       kindOf(d),
	}
	switch mopts.GetIdempotencyLevel() {
	case descriptorpb.MethodOptions_IDEMPOTENT, descriptorpb.MethodOptions_NO_SIDE_EFFECTS:
		op.idempotent = true
	}
	n := len(*ps)
	if op.kind.isStream() {
		if op.noReply {
			ps.add(d, "is %s and has no_reply; a stream's answers are its messages, so it cannot be fire and forget: remove no_reply", op.kind)
		}
		if len(op.mixin) > 0 {
			ps.add(d, "is %s and has mixin; a stream picks its target when it opens, before its first message, so request fields cannot route it: remove mixin, or put the keys in the pattern", op.kind)
		}
		if mo.GetTimeout() != nil {
			ps.add(d, "is %s and has a timeout; only its context's deadline bounds a stream, which lasts as long as its caller chooses: remove the timeout, and give the stream's context a deadline where one is wanted", op.kind)
		}
	}
	if strings.TrimSpace(op.written) == "" {
		op.written, op.defaulted = "cmd:"+snakeCase(string(d.Name())), true
	}
	own, err := pattern.Parse(op.written)
	switch {
	case err != nil:
		ps.add(d, "bad pattern %s", parseProblem(err))
	case own.HasGlob():
		ps.add(d, "pattern %q holds a glob (* or ?); generated clients call their pattern literally, so it cannot hold globs", op.written)
	case len(metaKeys(op.written)) > 0:
		ps.add(d, "pattern %q holds %s; %s", op.written, metaKeyList(metaKeys(op.written)), metaKeyReason)
	default:
		for _, pr := range own.Pairs() {
			if _, ok := base.Get(pr.Key); ok {
				ps.add(d, "key %q is in both the service pattern %q and the method pattern %q; a method pattern adds keys to its service's and cannot change them", pr.Key, written, op.written)
			}
		}
		op.full = base.With(own)
		op.canonical = op.full.String()
		if op.canonical == "" {
			ps.add(d, "pattern %q with service pattern %q is empty and would match every message", op.written, written)
		}
	}
	for i, k := range op.mixin {
		fd := d.Input().Fields().ByName(protoreflect.Name(k))
		switch {
		case slices.Contains(op.mixin[:i], k):
			ps.add(d, "mixin field %q is listed twice", k)
		case fd == nil:
			ps.add(d, "mixin field %q does not exist in %s", k, d.Input().FullName())
		case fd.IsMap() || fd.IsList():
			ps.add(d, "mixin field %q of %s is %s, not a singular scalar: only a single bool, number, string or enum can join a pattern", k, d.Input().FullName(), fieldShape(fd))
		case !routable(fd.Kind()):
			ps.add(d, "mixin field %q of %s is %s, not a scalar: only a bool, number, string or enum can join a pattern", k, d.Input().FullName(), fieldShape(fd))
		case op.canonical != "":
			if _, ok := op.full.Get(k); ok {
				ps.add(d, "mixin field %q is already a key of the pattern %q, which wins over it; the mixin would never route", k, op.canonical)
			}
		}
	}
	if t := mo.GetTimeout(); t != nil {
		switch {
		case t.CheckValid() != nil:
			ps.add(d, "bad timeout: %v", t.CheckValid())
		case t.GetSeconds() < 0 || t.GetNanos() < 0:
			ps.add(d, "timeout %v is negative", t.AsDuration())
		case t.GetSeconds() >= math.MaxInt64/int64(time.Second):
			ps.add(d, "timeout of %ds is too long", t.GetSeconds())
		default:
			op.timeout = t.AsDuration()
		}
	}
	if len(*ps) > n {
		return nil
	}
	return op
}

// parseProblem describes a pattern parse error without the runtime's
// "wizard: bad pattern" prefix.
func parseProblem(err error) string {
	var pe *pattern.ParseError
	if errors.As(err, &pe) {
		return fmt.Sprintf("%q: %s (at offset %d)", pe.Pattern, pe.Reason, pe.Pos)
	}
	return err.Error()
}

// metaKeyReason says why a contract's pattern cannot hold '$' keys.
const metaKeyReason = "keys ending in '$' are call metadata, which a pattern drops, so the key would be lost without a word; remove it, or rename it without the '$'"

// metaKeyList names keys for a message: key "a$", keys "a$" and "b$".
func metaKeyList(keys []string) string {
	q := make([]string, len(keys))
	for i, k := range keys {
		q[i] = fmt.Sprintf("%q", k)
	}
	if len(q) == 1 {
		return "key " + q[0]
	}
	return "keys " + strings.Join(q[:len(q)-1], ", ") + " and " + q[len(q)-1]
}

// metaKeys returns the keys of the pattern string s that end in '$' (call
// metadata, which [pattern.Parse] drops), in the order of s. s must
// parse: a key runs to ':' or a space, a quoted value to its closing quote
// (\" and \\ escape), an unquoted one to the next ','.
func metaKeys(s string) []string {
	var keys []string
	for i := 0; i < len(s); i++ { // i++ steps over the ',' between pairs
		for i < len(s) && isSpace(s[i]) {
			i++
		}
		start := i
		for i < len(s) && s[i] != ':' && !isSpace(s[i]) {
			i++
		}
		if k := s[start:i]; strings.HasSuffix(k, "$") {
			keys = append(keys, k)
		}
		for i < len(s) && s[i] != ':' {
			i++
		}
		for i++; i < len(s) && isSpace(s[i]); i++ {
		}
		if i < len(s) && s[i] == '"' {
			for i++; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' {
					i++
				}
			}
			i++
		}
		for i < len(s) && s[i] != ',' {
			i++
		}
	}
	return keys
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// routable reports whether fields of kind k can join a pattern: the kinds
// the runtime turns into pattern values.
func routable(k protoreflect.Kind) bool {
	switch k {
	case protoreflect.MessageKind, protoreflect.GroupKind, protoreflect.BytesKind:
		return false
	}
	return true
}

func fieldShape(fd protoreflect.FieldDescriptor) string {
	switch {
	case fd.IsMap():
		return "a map"
	case fd.IsList():
		return "a repeated field"
	case fd.Kind() == protoreflect.MessageKind:
		return "a message (" + string(fd.Message().FullName()) + ")"
	}
	return "of type " + fd.Kind().String()
}

// checkCollisions reports methods that share a canonical pattern among all
// the files of one generation run, whatever their proto packages: a node
// could not add both, and a caller could not tell which one it reaches.
func checkCollisions(cs []*contract, ps *problems) {
	seen := map[string]*operation{}
	for _, c := range cs {
		for _, op := range c.methods {
			if first, ok := seen[op.canonical]; ok {
				ps.add(op.m.Desc, "pattern %q is also the pattern of %s (%s); methods generated together need distinct patterns", op.canonical, first.m.Desc.FullName(), position(first.m.Desc))
				continue
			}
			seen[op.canonical] = op
		}
	}
}

// snakeCase turns a method name into the default cmd value:
// GetUser is get_user, HTTPGet is http_get, GetV2 is get_v2.
func snakeCase(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if isUpper(c) {
			if i > 0 && s[i-1] != '_' && (!isUpper(s[i-1]) || i+1 < len(s) && isLower(s[i+1])) {
				b.WriteByte('_')
			}
			c += 'a' - 'A'
		}
		b.WriteByte(c)
	}
	return b.String()
}

func isUpper(c byte) bool { return c >= 'A' && c <= 'Z' }
func isLower(c byte) bool { return c >= 'a' && c <= 'z' }
