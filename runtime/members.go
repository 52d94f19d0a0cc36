package runtime

import (
	"cmp"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// Member is a node of the mesh as this node sees it.
type Member struct {
	// ID is the node's id ("" until its catalog has been fetched, for a
	// peer discovery named only by address).
	ID string
	// Addr is the address its transport listens on.
	Addr string
	// Digest identifies its pattern set (see [Peer].Digest).
	Digest string
	// Self marks this node.
	Self bool
	// Suspect: discovery suspects it is down; it gets no new calls while
	// another target serves the pattern.
	Suspect bool
	// Connected: this node holds a connection to it now.
	Connected bool
	// Patterns is the number of its patterns in this node's routing.
	Patterns int
}

// PatternInfo is one pattern in a node's routing and the targets that
// serve it.
type PatternInfo struct {
	Pattern Pattern
	// Local: this node has a handler for it.
	Local bool
	// Remote lists the peers serving it, by id (by address when the id is
	// not known), sorted.
	Remote []string
}

// Members returns this node and the peers it knows, this node first, the
// others by address. A node without a transport knows only itself.
func (n *Node) Members() []Member {
	self := Member{ID: n.id, Self: true, Connected: true, Addr: n.Addr(), Patterns: len(n.localPatterns())}
	if n.remote == nil {
		return []Member{self}
	}
	self.Digest = n.digest()
	r := n.remote
	r.mu.Lock()
	peers := make([]*peer, 0, len(r.peers))
	for _, p := range r.peers {
		if !p.down.Load() {
			peers = append(peers, p)
		}
	}
	out := make([]Member, 0, 1+len(peers))
	out = append(out, self)
	for _, p := range peers {
		out = append(out, Member{ID: p.id, Addr: p.addr, Digest: cmp.Or(p.loaded, p.digest), Suspect: p.suspect.Load(), Connected: p.conn.Load() != nil})
	}
	r.mu.Unlock()
	n.routeMu.Lock()
	for i, p := range peers {
		out[i+1].Patterns = len(p.patterns)
	}
	n.routeMu.Unlock()
	slices.SortFunc(out[1:], func(a, b Member) int { return strings.Compare(a.Addr, b.Addr) })
	return out
}

// Patterns returns every pattern in this node's routing, local and remote,
// with the targets that serve it, in the order of [Router.List].
func (n *Node) Patterns() []PatternInfo {
	var names map[*peer]string
	if n.remote != nil {
		r := n.remote
		r.mu.Lock()
		names = make(map[*peer]string, len(r.peers))
		for _, p := range r.peers {
			names[p] = cmp.Or(p.id, p.addr)
		}
		r.mu.Unlock()
	}
	n.routeMu.Lock()
	defer n.routeMu.Unlock()
	list := n.router.List()
	out := make([]PatternInfo, 0, len(list))
	for _, pt := range list {
		re := n.router.exactEntry(pt)
		if re == nil {
			continue
		}
		info := PatternInfo{Pattern: pt, Local: re.value.local.Load() != nil}
		if ps := re.value.peers.Load(); ps != nil {
			for _, p := range *ps {
				name, ok := names[p]
				if !ok {
					name = p.addr // leaving: routed still, no longer listed
				}
				info.Remote = append(info.Remote, name)
			}
			slices.Sort(info.Remote)
		}
		out = append(out, info)
	}
	return out // List is sorted
}

// localPatterns returns the patterns of this node's own handlers.
func (n *Node) localPatterns() []Pattern {
	var out []Pattern
	for _, p := range n.router.List() {
		if re := n.router.exactEntry(p); re != nil && re.value.local.Load() != nil {
			out = append(out, p)
		}
	}
	return out
}

// selfDigest caches the digest of the node's own pattern set.
type selfDigest struct {
	gen atomic.Uint64 // bumped on every local change

	mu  sync.Mutex
	at  uint64 // the gen val belongs to
	ok  bool
	val string
}

// digest returns the digest of this node's pattern set.
func (n *Node) digest() string {
	s := &n.remote.self
	g := s.gen.Load()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ok || s.at != g {
		s.val, s.at, s.ok = digestOf(n.localPatterns()), g, true
	}
	return s.val
}

// localChanged tells discovery that this node's pattern set changed.
// Callers hold routeMu.
func (n *Node) localChanged() {
	if n.remote == nil {
		return
	}
	n.remote.self.gen.Add(1)
	if a, ok := n.remote.discovery.(SelfAnnouncer); ok {
		a.SelfChanged()
	}
}

// digestOf is the digest of a pattern set: the first 16 bytes of the
// SHA-256 of its canonical forms, sorted and joined by newlines, in
// unpadded URL-safe base64 (22 characters). Order and duplicates do not
// change it.
func digestOf(pats []Pattern) string {
	ss := make([]string, len(pats))
	for i, p := range pats {
		ss[i] = p.String()
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

// decodeCatalog parses a catalog as another node sent it. Any malformed
// part rejects the whole catalog: a node routes all of a peer's patterns
// or none of them.
func decodeCatalog(b []byte) (Catalog, []Pattern, error) {
	var c Catalog
	if err := json.Unmarshal(b, &c); err != nil {
		return Catalog{}, nil, err
	}
	if len(c.Patterns) > maxCatalogPatterns {
		return Catalog{}, nil, fmt.Errorf("%d patterns, more than %d", len(c.Patterns), maxCatalogPatterns)
	}
	pats := make([]Pattern, 0, len(c.Patterns))
	seen := make(map[string]bool, len(c.Patterns))
	for _, s := range c.Patterns {
		p, err := ParsePattern(s)
		if err != nil {
			return Catalog{}, nil, fmt.Errorf("pattern %q: %w", s, err)
		}
		if k := p.String(); !seen[k] {
			seen[k] = true
			pats = append(pats, p)
		}
	}
	if c.Digest != "" && c.Digest != digestOf(pats) {
		return Catalog{}, nil, fmt.Errorf("digest %q does not match its %d patterns", c.Digest, len(pats))
	}
	return c, pats, nil
}
