package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"
	"sync"

	"github.com/wizardmesh/wizard/runtime/internal/patrun"
	"github.com/wizardmesh/wizard/runtime/introspect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
)

// Schema is a node's answer on [introspect.DescribePattern].
type Schema struct {
	// ID is the node's id.
	ID string
	// Digest is the node's catalog digest (see [discovery.Peer] Digest), by which
	// a schema may be cached: a node's schema changes only with it.
	Digest string
	// Version is the version of the wizard module the node runs, as its
	// build records it ("(devel)" for a build inside the module).
	Version string
	// Methods maps each typed pattern, in canonical form, to its method's
	// full name ("wizard.examples.math.v1.MathService/Sum").
	Methods map[string]string
	// Files declares the methods and their messages, every import
	// included, each file after those it imports; nil without typed
	// patterns.
	Files *descriptorpb.FileDescriptorSet
}

// schemaWire is a [Schema] on the wire: JSON, the file set in protobuf's
// binary form (base64 in JSON).
type schemaWire struct {
	Have    string            `json:"have,omitempty"`
	ID      string            `json:"id,omitempty"`
	Digest  string            `json:"digest,omitempty"`
	Version string            `json:"version,omitempty"`
	Methods map[string]string `json:"methods,omitempty"`
	Files   []byte            `json:"files,omitempty"`
}

// Method returns the descriptor of the method that serves pattern (a
// typed pattern of the schema, in any spelling), built from s.Files.
func (s Schema) Method(pattern string) (protoreflect.MethodDescriptor, error) {
	p, err := patrun.Parse(pattern)
	if err != nil {
		return nil, err
	}
	name, ok := s.Methods[p.String()]
	if !ok {
		return nil, Errorf(CodeNotFound, "wizard: %s is not a typed pattern of node %s", quoteClipped(p.String(), maxEcho), s.ID)
	}
	files, err := s.Registry()
	if err != nil {
		return nil, err
	}
	svc, method, _ := strings.Cut(name, "/")
	d, err := files.FindDescriptorByName(protoreflect.FullName(svc))
	if err != nil {
		return nil, Errorf(CodeInternal, "wizard: the schema of node %s has no service %s: %v", s.ID, svc, err)
	}
	sd, ok := d.(protoreflect.ServiceDescriptor)
	if !ok {
		return nil, Errorf(CodeInternal, "wizard: the schema of node %s: %s is not a service", s.ID, svc)
	}
	md := sd.Methods().ByName(protoreflect.Name(method))
	if md == nil {
		return nil, Errorf(CodeInternal, "wizard: the schema of node %s: service %s has no method %s", s.ID, svc, method)
	}
	return md, nil
}

// Registry builds the files of s into a registry.
func (s Schema) Registry() (*protoregistry.Files, error) {
	if s.Files == nil {
		return new(protoregistry.Files), nil
	}
	files, err := protodesc.NewFiles(s.Files)
	if err != nil {
		return nil, Errorf(CodeInternal, "wizard: the schema of node %s does not build: %v", s.ID, err)
	}
	return files, nil
}

// schema is this node's own [Schema].
func (n *Node) schema() Schema {
	s := Schema{ID: n.id, Digest: n.digest(), Version: moduleVersion()}
	var mds []protoreflect.MethodDescriptor
	for _, p := range n.router.List() {
		re := n.exactRoute(p)
		if re == nil {
			continue
		}
		e := re.local.Load()
		if e == nil || e.spec == nil || e.spec.Method == nil {
			continue
		}
		if s.Methods == nil {
			s.Methods = map[string]string{}
		}
		s.Methods[p.String()] = string(e.spec.Method.Parent().FullName()) + "/" + string(e.spec.Method.Name())
		mds = append(mds, e.spec.Method)
	}
	if len(mds) > 0 {
		s.Files = fileSet(mds)
	}
	return s
}

// fileSet is the files declaring mds with their imports, each after
// those it imports.
func fileSet(mds []protoreflect.MethodDescriptor) *descriptorpb.FileDescriptorSet {
	set := new(descriptorpb.FileDescriptorSet)
	seen := map[string]bool{}
	var add func(fd protoreflect.FileDescriptor)
	add = func(fd protoreflect.FileDescriptor) {
		if seen[fd.Path()] {
			return
		}
		seen[fd.Path()] = true
		imps := fd.Imports()
		for i := range imps.Len() {
			add(imps.Get(i).FileDescriptor)
		}
		set.File = append(set.File, protodesc.ToFileDescriptorProto(fd))
	}
	for _, md := range mds {
		add(md.ParentFile())
	}
	return set
}

// moduleVersion is the version of this module in the running binary's
// build information.
var moduleVersion = sync.OnceValue(func() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	const path = "github.com/wizardmesh/wizard"
	if bi.Main.Path == path {
		return bi.Main.Version
	}
	for _, d := range bi.Deps {
		if d.Path == path {
			if d.Replace != nil {
				return d.Replace.Version
			}
			return d.Version
		}
	}
	return ""
})

// describeReply answers a call on [introspect.DescribePattern].
func (n *Node) describeReply(m *Message) *Message {
	if have := pulledDigest(m.Payload); have != "" && have == n.digest() {
		b, err := json.Marshal(schemaWire{Have: have, ID: n.id, Version: moduleVersion()})
		if err != nil {
			return errorReply(err)
		}
		return &Message{Codec: CodecJSON, Payload: b}
	}
	s := n.schema()
	w := schemaWire{ID: s.ID, Digest: s.Digest, Version: s.Version, Methods: s.Methods}
	if s.Files != nil {
		b, err := proto.Marshal(s.Files)
		if err != nil {
			return errorReply(err)
		}
		w.Files = b
	}
	b, err := json.Marshal(w)
	if err != nil {
		return errorReply(err)
	}
	return &Message{Codec: CodecJSON, Payload: b}
}

// describeConn asks the node at the other end of c for its [Schema]
// through [introspect.DescribePattern]. have, when not nil, is a schema the caller
// holds: the node answers the digest alone when it is its own, and
// describeConn returns have itself.
func describeConn(ctx context.Context, c Conn, have *Schema) (Schema, error) {
	req := &Message{Pattern: introspect.DescribePattern}
	if have != nil && have.Digest != "" {
		b, err := json.Marshal(catalogPull{Have: have.Digest})
		if err != nil {
			return Schema{}, err
		}
		req.Codec, req.Payload = CodecJSON, b
	}
	reply, err := c.Call(ctx, req)
	if err != nil {
		return Schema{}, err
	}
	if reply == nil {
		return Schema{}, Errorf(CodeInternal, "wizard: describe: no reply")
	}
	if reply.Code != CodeOK {
		return Schema{}, &Error{Code: reply.Code, Message: reply.Error}
	}
	return decodeSchema(reply.Payload, have)
}

// decodeSchema reads an answer on [introspect.DescribePattern] to a pull that named
// have (nil for none).
func decodeSchema(b []byte, have *Schema) (Schema, error) {
	var w schemaWire
	if err := json.Unmarshal(b, &w); err != nil {
		return Schema{}, Errorf(CodeInternal, "wizard: describe: bad answer: %v", err)
	}
	if w.Have != "" {
		if have == nil || w.Have != have.Digest {
			return Schema{}, Errorf(CodeInternal, "wizard: describe: the answer confirms digest %q, not asked for", w.Have)
		}
		s := *have // the same catalog: the same schema, of this node
		s.ID, s.Version = w.ID, w.Version
		return s, nil
	}
	s := Schema{ID: w.ID, Digest: w.Digest, Version: w.Version, Methods: w.Methods}
	if len(w.Files) > 0 {
		s.Files = new(descriptorpb.FileDescriptorSet)
		if err := proto.Unmarshal(w.Files, s.Files); err != nil {
			return Schema{}, Errorf(CodeInternal, "wizard: describe: bad file set: %v", err)
		}
	}
	for k, m := range s.Methods {
		if svc, name, ok := strings.Cut(m, "/"); !ok || !protoreflect.FullName(svc).IsValid() || !protoreflect.Name(name).IsValid() {
			return Schema{}, Errorf(CodeInternal, "wizard: describe: pattern %s: %s is not a method name", quoteClipped(k, maxEcho), quoteClipped(m, maxEchoKey))
		}
	}
	return s, nil
}

// schemaCache keeps the schemas nodes pulled, by catalog digest, at most
// maxCachedSchemas (then it starts over). A pull names the digest of the
// peer's catalog: the peer confirms it, or answers its schema in full.
type schemaCache struct {
	mu sync.Mutex
	m  map[string]*Schema
}

var schemas schemaCache

// maxCachedSchemas bounds the schemas kept.
const maxCachedSchemas = 256

func (c *schemaCache) get(digest string) *Schema {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[digest]
}

func (c *schemaCache) put(s *Schema) {
	if s.Digest == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxCachedSchemas {
		c.m = map[string]*Schema{}
	}
	c.m[s.Digest] = s
}

// Describe returns the [Schema] of a node that serves pattern: this
// node's own when it has the handler, else that of a connected peer of
// the pattern's route (one whose catalog lists types for it, when there
// is one). An untyped pattern's node answers a schema without it: see
// [Schema.Methods].
func (n *Node) Describe(ctx context.Context, pattern string) (Schema, error) {
	p, err := patrun.Parse(pattern)
	if err != nil {
		return Schema{}, err
	}
	r := n.findRoute(p)
	if r == nil {
		_, err := n.notFound(p.String(), &noOptions)
		return Schema{}, err
	}
	if r.local.Load() != nil {
		return n.schema(), nil
	}
	var peers []*peer
	if ps := r.peers.Load(); ps != nil {
		peers = slices.Clone(*ps)
	}
	k := r.pattern.String()
	n.routeMu.Lock()
	slices.SortStableFunc(peers, func(a, b *peer) int { // typed first
		_, ta := a.types[k]
		_, tb := b.types[k]
		switch {
		case ta == tb:
			return 0
		case ta:
			return -1
		}
		return 1
	})
	n.routeMu.Unlock()
	for _, pr := range peers {
		if pr.conn.Load() != nil && !pr.down.Load() {
			return n.describePeer(ctx, pr)
		}
	}
	return Schema{}, n.refusal(r, "")
}

// DescribePeer returns the [Schema] of the peer with id or address
// idOrAddr; this node's own for its id or address.
func (n *Node) DescribePeer(ctx context.Context, idOrAddr string) (Schema, error) {
	if idOrAddr == n.id || idOrAddr != "" && idOrAddr == n.Addr() {
		return n.schema(), nil
	}
	if n.remote == nil {
		return Schema{}, Errorf(CodeNotFound, "wizard: no peer %q: the node has no transport", idOrAddr)
	}
	n.remote.mu.Lock()
	p := n.remote.peers[idOrAddr]
	if p == nil {
		for _, q := range n.remote.peers {
			if q.id == idOrAddr {
				p = q
			}
		}
	}
	n.remote.mu.Unlock()
	if p == nil {
		return Schema{}, Errorf(CodeNotFound, "wizard: no peer %q; %s", idOrAddr, n.knownPeers())
	}
	return n.describePeer(ctx, p)
}

func (n *Node) describePeer(ctx context.Context, p *peer) (Schema, error) {
	box := p.conn.Load()
	if box == nil {
		return Schema{}, Errorf(CodeUnavailable, "wizard: peer %s is not connected", peerName(p.id, p.addr))
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, n.remote.defaultTimeout)
		defer cancel()
	}
	n.remote.mu.Lock()
	have := schemas.get(p.loaded)
	name := peerName(p.id, p.addr)
	n.remote.mu.Unlock()
	s, err := describeConn(ctx, box.c, have)
	if err != nil {
		return Schema{}, fmt.Errorf("wizard: describe %s: %w", name, err)
	}
	if have == nil || s.Digest != have.Digest {
		schemas.put(&s)
	}
	return s, nil
}
