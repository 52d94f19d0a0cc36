package runtime

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wizardmesh/wizard/runtime/discovery"
	"github.com/wizardmesh/wizard/runtime/internal/patrun"
	"github.com/wizardmesh/wizard/runtime/introspect"
	"github.com/wizardmesh/wizard/runtime/pattern"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// catalog is what a node answers on [introspect.CatalogPattern]: its id, the digest
// of its pattern set (see [discovery.Peer] Digest) and the patterns of its local
// handlers.
type catalog struct {
	ID       string   `json:"id"`
	Digest   string   `json:"digest,omitempty"`
	Instance string   `json:"instance,omitempty"`
	Patterns []string `json:"patterns"`
	// Types gives, for each typed pattern (a handler added with
	// [Method]), the protobuf full names of its request and response.
	Types map[string][2]string `json:"types,omitempty"`

	types catalogTypes // Types, checked (decodeCatalog)
}

// catalogTypes are the message types of a catalog's typed patterns, by
// canonical pattern.
type catalogTypes map[string]typeNames

// The bounds of the catalogs a node keeps by digest, in number and in
// bytes (estimated); past either the cache starts over (the catalogs in
// routing stay routed). A catalog larger than a quarter of the bytes is
// routed but not kept.
const (
	maxCachedCatalogs     = 4096
	maxCachedCatalogBytes = 16 << 20
)

// catalogJitter spreads the catalog fetches that one gossiped change
// starts across a cluster.
const catalogJitter = 20 * time.Millisecond

// catalogPull is the payload of a catalog pull from a node that has the
// patterns of a digest cached: the pulled node answers a
// [catalogConfirmation] when that digest is its own, else its full
// catalog. A pull without a payload asks for the full catalog.
type catalogPull struct {
	Have string `json:"have"`
}

// catalogConfirmation is a node's answer to a [catalogPull] that names the
// digest of its pattern set: that digest again, standing for the patterns
// the caller has, and the node's id and instance.
type catalogConfirmation struct {
	Have     string `json:"have"`
	ID       string `json:"id"`
	Instance string `json:"instance,omitempty"`
}

// maxPullSize bounds the catalog pulls read as a [catalogPull]; a longer
// one gets the full catalog. maxConfirmationSize bounds the answers read
// as a [catalogConfirmation]; a longer one is a full catalog.
const maxPullSize, maxConfirmationSize = 128, 512

// errUnaskedConfirmation rejects an answer that confirms a digest the
// pull did not name.
var errUnaskedConfirmation = errors.New("it confirms a digest not asked for")

// loadCatalog routes p's patterns as p states them over box. The pull
// names the digest this node has cached for p, if any (the one discovery
// announced, else the one routed now): p answers that digest alone when it
// is its own, and the cached patterns are routed; else p answers its full
// catalog. Discovery only says where to dial: nothing is routed that p did
// not state itself, on its own connection.
func (n *Node) loadCatalog(p *peer, box *connBox) error {
	if box == nil {
		return ErrNotSent // the connection is gone; runPeer starts over
	}
	r := n.remote
	r.mu.Lock()
	announced := p.digest
	have := announced
	cached, ok := r.catalogs[have]
	if !ok {
		have = p.loaded
		cached, ok = r.catalogs[have]
	}
	if !ok {
		have = ""
	}
	cachedTypes := r.catalogTypes[have]
	r.mu.Unlock()
	if announced != "" && have != announced {
		// A gossiped change reaches every node at about the same time, and
		// this one is pulled in full.
		t := time.NewTimer(rand.N(catalogJitter))
		select {
		case <-t.C:
		case <-p.ctx.Done():
			t.Stop()
			return p.ctx.Err()
		}
	}
	return n.fetchCatalog(p, box, have, cached, cachedTypes)
}

// fetchCatalog pulls p's catalog over box, naming the digest have whose
// patterns and types, cached, are cached ("" for none), and routes its
// patterns.
func (n *Node) fetchCatalog(p *peer, box *connBox, have string, cached []pattern.Pattern, cachedTypes catalogTypes) error {
	pulls := n.remote.pulls
	select {
	case pulls <- struct{}{}:
	case <-p.ctx.Done():
		return p.ctx.Err()
	case <-box.c.Done():
		return ErrNotSent // the connection is gone; runPeer starts over
	}
	defer func() { <-pulls }()
	ctx, cancel := context.WithTimeout(p.ctx, n.remote.pullTimeout())
	defer cancel()
	req := &Message{Pattern: introspect.CatalogPattern, Meta: []MetaPair{{metaCaller, n.id}}}
	if have != "" {
		b, err := json.Marshal(catalogPull{Have: have})
		if err != nil {
			return err
		}
		req.Codec, req.Payload = CodecJSON, b
	}
	reply, err := box.c.Call(ctx, req)
	if err != nil {
		return err
	}
	if reply.Code != CodeOK {
		return &Error{Code: reply.Code, Message: reply.Error}
	}
	c, pats, err := readCatalog(reply.Payload, have, cached, &n.limits, n.routedPattern)
	if err != nil {
		n.log.Warn("wizard: catalog rejected", "addr", p.addr, "err", err)
		return fmt.Errorf("wizard: bad catalog from %s: %w", p.addr, err)
	}
	certified := certifiedID(box.c)
	r := n.remote
	r.mu.Lock()
	if err := n.misidentified(p, c, certified); err != nil {
		r.mu.Unlock()
		return err // runPeer parks p
	}
	announcedID := p.id
	// Who answers at the address is who the peer says it is, one of those
	// discovery announced there (a restarted node, or a later claim
	// another member made for the address).
	if c.ID != "" {
		p.id = c.ID
	}
	if c.Instance != "" {
		p.instance = c.Instance
		inst := c.Instance // not &c.Instance: that would keep c, its pattern strings and all
		box.inst.Store(&inst)
	}
	// What was loaded, which may differ from what was announced (the peer
	// changed since, or restarted and has not added its handlers yet): a
	// later announcement of another digest fetches again.
	types := c.types
	before := p.loaded
	if have != "" && c.Digest == have && len(c.Patterns) == 0 {
		p.loaded = have // confirmed: pats are the cached ones
		types = cachedTypes
		if _, ok := r.catalogs[have]; !ok {
			r.cacheCatalog(have, pats, types) // dropped since the pull began
		}
	} else {
		p.loaded = catalogDigest(pats, types)
		r.cacheCatalog(p.loaded, pats, types)
	}
	if before != p.loaded {
		r.uncacheUnused(before)
	}
	loaded := p.loaded
	r.mu.Unlock()
	if announcedID != "" && c.ID != "" && c.ID != announcedID {
		n.log.Warn("wizard: peer answers under another id than discovery announced", "addr", p.addr, "announced", announcedID, "id", c.ID)
	}
	if err := n.learnTypes(ctx, box.c, loaded, types); err != nil {
		// Routed all the same: calls that decode into the types they link
		// work; JSON of this peer's answers waits for the next pull.
		n.log.Warn("wizard: the peer's message types could not be learnt", "addr", p.addr, "err", err)
	}
	n.setTypedCatalog(p, pats, types)
	return nil
}

// readCatalog reads a peer's answer to a catalog pull that named the
// digest have, whose patterns are cached ("" and nil for none): a
// confirmation of have stands for cached (the catalog returned has
// Digest have and no Patterns); any other answer is a full catalog,
// decoded as [decodeCatalogShared] does with known.
func readCatalog(b []byte, have string, cached []pattern.Pattern, lim *limits, known func(string) (pattern.Pattern, bool)) (catalog, []pattern.Pattern, error) {
	if len(b) <= maxConfirmationSize && bytes.Contains(b, []byte(`"have"`)) {
		var conf struct {
			catalogConfirmation
			Digest   string          `json:"digest"`
			Patterns json.RawMessage `json:"patterns"`
		}
		if json.Unmarshal(b, &conf) == nil && conf.Have != "" {
			switch {
			case conf.Have != have:
				return catalog{}, nil, fmt.Errorf("%w (%q)", errUnaskedConfirmation, conf.Have)
			case conf.Digest != "" || conf.Patterns != nil:
				return catalog{}, nil, errors.New("a confirmation with a digest or patterns")
			}
			return catalog{ID: conf.ID, Digest: have, Instance: conf.Instance}, cached, nil
		}
	}
	return decodeCatalogShared(b, lim, known)
}

// routedPattern returns the pattern the node routes whose canonical form
// is s, if there is one: a peer's catalog shares it rather than keep a
// copy. The patterns of one peer's successive catalogs, and those that
// replicas serve, are then held once.
func (n *Node) routedPattern(s string) (pattern.Pattern, bool) {
	return patrun.Added(n.router, s)
}

// cacheCatalog keeps pats by their digest d, within maxCachedCatalogs and
// maxCachedCatalogBytes. Callers hold r.mu.
func (r *remote) cacheCatalog(d string, pats []pattern.Pattern, types catalogTypes) {
	if old, ok := r.catalogs[d]; ok {
		r.catalogBytes -= catalogSize(d, old, r.catalogTypes[d])
		delete(r.catalogs, d)
		delete(r.catalogTypes, d)
	}
	size := catalogSize(d, pats, types)
	if size > maxCachedCatalogBytes/4 {
		return
	}
	if len(r.catalogs) >= maxCachedCatalogs || r.catalogBytes+size > maxCachedCatalogBytes {
		clear(r.catalogs)
		clear(r.catalogTypes)
		r.catalogBytes = 0
	}
	r.catalogs[d] = pats
	if len(types) > 0 {
		r.catalogTypes[d] = types
	}
	r.catalogBytes += size
}

// uncacheUnused drops the catalog of digest d, which a peer replaced or
// stopped announcing, from the cache when no peer has it loaded or
// announced: the catalogs a member announced on its way to its full set
// were each held until the cache bound otherwise. A peer that leaves does
// not call it: its last catalog stays cached, for when it comes back.
// Callers hold r.mu.
func (r *remote) uncacheUnused(d string) {
	pats, ok := r.catalogs[d]
	if !ok {
		return
	}
	for _, q := range r.peers {
		if q.loaded == d || q.digest == d {
			return
		}
	}
	r.catalogBytes -= catalogSize(d, pats, r.catalogTypes[d])
	delete(r.catalogs, d)
	delete(r.catalogTypes, d)
}

// catalogSize estimates the bytes a cached catalog holds.
func catalogSize(d string, pats []pattern.Pattern, types catalogTypes) int {
	size := len(d) + 64
	for _, p := range pats {
		size += 16 + patrun.Size(p)
	}
	for k, t := range types {
		size += 48 + len(k) + len(t.in) + len(t.out)
	}
	return size
}

// setCatalog makes pats the patterns p serves in routing, none of them
// typed.
func (n *Node) setCatalog(p *peer, pats []pattern.Pattern) { n.setTypedCatalog(p, pats, nil) }

// setTypedCatalog makes pats the patterns p serves in routing, types the
// message types of its typed ones.
func (n *Node) setTypedCatalog(p *peer, pats []pattern.Pattern, types catalogTypes) {
	n.routeMu.Lock()
	defer n.routeMu.Unlock()
	if p.ctx.Err() != nil || p.down.Load() {
		pats, types = nil, nil // the peer left: a late catalog must not bring it back
	}
	oldTypes := p.types
	p.types = types
	// Routes whose patterns keep p but change its types: the others are
	// updated as p joins or leaves them.
	defer func() {
		for k := range oldTypes {
			n.retype(k)
		}
		for k := range types {
			if _, ok := oldTypes[k]; !ok {
				n.retype(k)
			}
		}
	}()
	old := p.patterns
	changed := false
	// By canonical form, in a set: a catalog may hold 100,000 patterns.
	in := make(map[string]bool, len(pats))
	for _, pt := range pats {
		in[pt.String()] = true
	}
	subsChanged := false
	for _, o := range old {
		if !in[o.String()] {
			if _, _, sub := splitSubscription(o); sub {
				n.removePeerSub(o, p)
				subsChanged = true
			} else {
				n.removePeerRoute(o, p)
			}
			changed = true
		}
		delete(in, o.String()) // left in: the new ones
	}
	for _, pt := range pats {
		if in[pt.String()] {
			if _, _, sub := splitSubscription(pt); sub {
				n.addPeerSub(pt, p)
				subsChanged = true
			} else {
				n.addPeerRoute(pt, p)
			}
			changed = true
		}
	}
	if subsChanged {
		n.publishSubs()
	}
	p.patterns = pats
	if changed {
		n.routingChanged()
	}
}

// joinRoute adds p to the peers of r, a route callers can see. Callers
// hold routeMu.
func (n *Node) joinRoute(r *route, p *peer) {
	var peers []*peer
	if cur := r.peers.Load(); cur != nil {
		peers = slices.Clone(*cur)
	}
	peers = append(peers, p)
	n.balancerOf(r).Add(&p.target, 1)
	r.peers.Store(&peers)
	r.retype()
}

// addPeerRoute adds p as a target of pattern pt. Callers hold routeMu.
func (n *Node) addPeerRoute(pt pattern.Pattern, p *peer) {
	if re := n.exactRoute(pt); re != nil {
		n.joinRoute(re, p)
		return
	}
	r := &route{pattern: pt}
	n.balancerOf(r).Add(&p.target, 1)
	r.peers.Store(&[]*peer{p}) // complete before any caller can see it
	r.retype()
	_ = n.router.Add(pt, r) // cannot fail: pt is absent and routeMu is held
}

// retype updates the types of the route of the pattern whose canonical
// form is k, if there is one. Callers hold routeMu.
func (n *Node) retype(k string) {
	pt, err := pattern.Parse(k)
	if err != nil {
		return
	}
	if re := n.exactRoute(pt); re != nil {
		re.retype()
	}
	n.retypeSub(k)
}

// retype sets r's types: those every peer of r lists for its pattern, or
// none. Callers hold routeMu.
func (r *route) retype() {
	var common *typeNames
	if ps := r.peers.Load(); ps != nil {
		k := r.pattern.String()
		for i, p := range *ps {
			t, ok := p.types[k]
			if !ok || i > 0 && *common != t {
				common = nil
				break
			}
			common = &t
		}
	}
	r.types.Store(common)
}

// removePeerRoute removes p as a target of pattern pt, and the route when
// nothing serves it any more. Callers hold routeMu.
func (n *Node) removePeerRoute(pt pattern.Pattern, p *peer) {
	re := n.exactRoute(pt)
	if re == nil {
		return
	}
	r := re
	if cur := r.peers.Load(); cur != nil {
		peers := slices.DeleteFunc(slices.Clone(*cur), func(q *peer) bool { return q == p })
		n.balancerOf(r).Remove(&p.target)
		if len(peers) == 0 && r.local.Load() == nil {
			// Out of the router first, so no caller finds an empty route
			// where a wider pattern would answer.
			n.router.Remove(pt)
		}
		r.peers.Store(&peers)
		r.retype()
	}
}

// catalogReply answers the catalog pull m: a confirmation when m names
// this node's digest (see [catalogPull]), else the full catalog.
func (n *Node) catalogReply(m *Message) *Message {
	digest, full, err := n.selfCatalog()
	if err != nil {
		return errorReply(err)
	}
	if have := pulledDigest(m.Payload); have != "" && have == digest {
		b, err := json.Marshal(catalogConfirmation{Have: have, ID: n.id, Instance: n.instance})
		if err != nil {
			return errorReply(err)
		}
		return &Message{Codec: CodecJSON, Payload: b}
	}
	return &Message{Codec: CodecJSON, Payload: full}
}

// encodeCatalog is the full catalog of pats and types as a pull's answer
// carries it, with its digest.
func (n *Node) encodeCatalog(pats []pattern.Pattern, types catalogTypes) (digest string, full []byte, err error) {
	c := catalog{ID: n.id, Digest: catalogDigest(pats, types), Instance: n.instance, Patterns: make([]string, len(pats))}
	for i, p := range pats {
		c.Patterns[i] = p.String()
	}
	if len(types) > 0 {
		c.Types = make(map[string][2]string, len(types))
		for k, t := range types {
			c.Types[k] = [2]string{t.in, t.out}
		}
	}
	full, err = json.Marshal(c)
	return c.Digest, full, err
}

// pulledDigest is the digest a catalog pull's payload b names, or "".
func pulledDigest(b []byte) string {
	if len(b) == 0 || len(b) > maxPullSize {
		return ""
	}
	var pull catalogPull
	if json.Unmarshal(b, &pull) != nil {
		return ""
	}
	return pull.Have
}

// localPatterns returns the patterns of this node's own handlers.
func (n *Node) localPatterns() []pattern.Pattern {
	pats, _ := n.localCatalog()
	return pats
}

// localCatalog returns the patterns of this node's own handlers, and the
// message types of those added with [Method].
func (n *Node) localCatalog() ([]pattern.Pattern, catalogTypes) {
	var out []pattern.Pattern
	var types catalogTypes
	for _, p := range n.router.List() {
		re := n.exactRoute(p)
		if re == nil {
			continue
		}
		e := re.local.Load()
		if e == nil {
			continue
		}
		out = append(out, p)
		if e.types.in != "" {
			if types == nil {
				types = catalogTypes{}
			}
			types[p.String()] = e.types
		}
	}
	for _, s := range n.localSubscriptions() {
		out = append(out, s.wire)
		if s.types.in != "" {
			if types == nil {
				types = catalogTypes{}
			}
			types[s.wire.String()] = s.types
		}
	}
	return out, types
}

// selfDigest caches the digest of the node's own pattern set and the
// full catalog a pull is answered with: when a mesh-wide change (a
// deploy) has every other member pull it at once, the node lists, sorts,
// hashes and encodes its catalog once, not once per member.
type selfDigest struct {
	gen atomic.Uint64 // bumped on every local change

	mu   sync.Mutex
	at   uint64 // the gen val and full belong to
	ok   bool
	val  string
	full []byte // read only once set: answers share it
}

// digest returns the digest of this node's pattern set.
func (n *Node) digest() string {
	if n.remote == nil {
		return catalogDigest(n.localCatalog())
	}
	d, _, _ := n.selfCatalog() // encoding strings does not fail
	return d
}

// selfCatalog returns the digest of this node's pattern set and its full
// catalog, encoded, as of the node's last local change.
func (n *Node) selfCatalog() (digest string, full []byte, err error) {
	if n.remote == nil {
		return n.encodeCatalog(n.localCatalog())
	}
	s := &n.remote.self
	g := s.gen.Load()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ok || s.at != g {
		d, b, err := n.encodeCatalog(n.localCatalog())
		if err != nil {
			return "", nil, err
		}
		s.val, s.full, s.at, s.ok = d, b, g, true
	}
	return s.val, s.full, nil
}

// localChanged tells discovery that this node's pattern set changed.
// Callers hold routeMu.
func (n *Node) localChanged() {
	if n.remote == nil {
		return
	}
	n.remote.self.gen.Add(1)
	if a, ok := n.remote.discovery.(discovery.SelfAnnouncer); ok {
		a.SelfChanged()
	}
}

// digestOf is the digest of a pattern set: the first 16 bytes of the
// SHA-256 of its canonical forms, sorted and joined by newlines, in
// unpadded URL-safe base64 (22 characters). Order and duplicates do not
// change it.
func digestOf(pats []pattern.Pattern) string { return catalogDigest(pats, nil) }

// catalogDigest is the digest of a pattern set whose typed patterns have
// types: as digestOf, a typed pattern's line followed by a tab and its
// request and response types (so that a change of types is a change of
// catalog).
func catalogDigest(pats []pattern.Pattern, types catalogTypes) string {
	ss := make([]string, len(pats))
	for i, p := range pats {
		ss[i] = p.String()
		if t, ok := types[ss[i]]; ok {
			ss[i] += "\t" + t.in + "\t" + t.out
		}
	}
	slices.Sort(ss)
	ss = slices.Compact(ss)
	h := sha256.New()
	for _, s := range ss {
		h.Write([]byte(s))
		h.Write([]byte{'\n'})
	}
	var sum [sha256.Size]byte
	return base64.RawURLEncoding.EncodeToString(h.Sum(sum[:0])[:16])
}

// maxCatalogPatterns bounds the patterns one catalog may carry.
const maxCatalogPatterns = 1 << 17

// decodeCatalog parses a catalog as another node sent it, each pattern
// within lim. Any malformed part rejects the whole catalog: a node routes
// all of a peer's patterns or none of them.
func decodeCatalog(b []byte, lim *limits) (catalog, []pattern.Pattern, error) {
	return decodeCatalogShared(b, lim, nil)
}

// decodeCatalogShared is decodeCatalog taking, for a pattern string that
// known has parsed already (in canonical form, as catalogs send them),
// known's pattern instead of a new one. A pattern known has is taken
// only within lim, as a parsed one would be.
func decodeCatalogShared(b []byte, lim *limits, known func(string) (pattern.Pattern, bool)) (catalog, []pattern.Pattern, error) {
	var c catalog
	if err := json.Unmarshal(b, &c); err != nil {
		return catalog{}, nil, err
	}
	if len(c.Patterns) > maxCatalogPatterns {
		return catalog{}, nil, fmt.Errorf("%d patterns, more than %d", len(c.Patterns), maxCatalogPatterns)
	}
	pats := make([]pattern.Pattern, 0, len(c.Patterns))
	seen := make(map[string]bool, len(c.Patterns))
	for _, s := range c.Patterns {
		p, ok := pattern.Pattern{}, false
		if known != nil && len(s) <= lim.patternBytes {
			p, ok = known(s)
			ok = ok && p.Len() <= lim.patternKeys
		}
		if !ok {
			var err error
			if p, err = lim.parse(s); err != nil {
				return catalog{}, nil, err
			}
		}
		if k := p.String(); !seen[k] {
			seen[k] = true
			pats = append(pats, p)
		}
	}
	if len(c.Types) > 0 {
		types, err := checkTypes(c.Types, seen)
		if err != nil {
			return catalog{}, nil, err
		}
		c.types = types
	}
	if c.Digest != "" && c.Digest != catalogDigest(pats, c.types) {
		return catalog{}, nil, fmt.Errorf("digest %q does not match its %d patterns", c.Digest, len(pats))
	}
	return c, pats, nil
}

// maxTypeName bounds a message type name in a catalog.
const maxTypeName = 512

// checkTypes checks a catalog's types: each for one of its patterns (in
// canonical form, in seen), two protobuf full names.
func checkTypes(in map[string][2]string, seen map[string]bool) (catalogTypes, error) {
	types := make(catalogTypes, len(in))
	for k, t := range in {
		if !seen[k] {
			return nil, fmt.Errorf("types for %s, not one of its patterns (in canonical form)", quoteClipped(k, maxEcho))
		}
		for _, name := range t {
			if !protoreflect.FullName(name).IsValid() || len(name) > maxTypeName {
				return nil, fmt.Errorf("types for %s: %s is not a protobuf message name", quoteClipped(k, maxEcho), quoteClipped(name, maxEchoKey))
			}
		}
		types[k] = typeNames{t[0], t[1]}
	}
	return types, nil
}
