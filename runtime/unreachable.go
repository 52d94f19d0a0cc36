package runtime

import (
	"fmt"
	"slices"
	"strings"
)

// What a node says of the peers it cannot reach, so that a failed call
// or WaitFor names them: a pattern nobody serves is not_found only when
// every peer the node knows has answered with its catalog; while some
// cannot be reached (down, refusing, on another transport) the node
// cannot know that none of them serves it, and says unavailable.

// Bounds of what the errors name: peers, and the length of an error.
const (
	maxNamedPeers = 3
	maxErrEcho    = 200
)

// Why a peer is not reachable while its catalog is on its way.
const (
	whyNotAnswered = "not answered yet"
	whyNotLoaded   = "connected, catalog not loaded yet"
)

// peerState is what a node knows of one peer, for its errors.
type peerState struct {
	name      string // "id at addr", or addr
	transport string
	connected bool // connected and its catalog loaded
	why       string
}

func (s peerState) String() string {
	if s.why == "" {
		return s.name
	}
	return s.name + " (" + s.why + ")"
}

// peerStates returns what the node knows of its peers, by address; with
// unreachable, only those it cannot reach.
func (n *Node) peerStates(unreachable bool) []peerState {
	r := n.remote
	if r == nil {
		return nil
	}
	own := r.transport.Name()
	r.mu.Lock()
	out := make([]peerState, 0, len(r.peers)+len(r.foreign))
	for _, p := range r.peers {
		s := peerState{name: peerName(p.id, p.addr), transport: own, connected: p.conn.Load() != nil && p.loaded != ""}
		if s.connected {
			if !unreachable {
				out = append(out, s)
			}
			continue
		}
		switch e := p.dialErr.Load(); {
		case e != nil:
			s.why = clip(*e, maxErrEcho)
		case p.conn.Load() != nil:
			s.why = whyNotLoaded
		default:
			s.why = whyNotAnswered
		}
		out = append(out, s)
	}
	for _, p := range r.foreign {
		out = append(out, peerState{name: peerName(p.ID, p.Addr), transport: p.Transport, why: fmt.Sprintf("on transport %s; this node speaks %s", p.Transport, own)})
	}
	r.mu.Unlock()
	slices.SortFunc(out, func(a, b peerState) int { return strings.Compare(a.name, b.name) })
	return out
}

// routeStates returns what the node knows of the peers of a route that
// none of them could take a call of: why each is not connected.
func (n *Node) routeStates(rt *route) []peerState {
	ps := rt.peers.Load()
	if ps == nil {
		return nil
	}
	out := make([]peerState, 0, len(*ps))
	n.remote.mu.Lock()
	for _, p := range *ps {
		s := peerState{name: peerName(p.id, p.addr), connected: p.conn.Load() != nil}
		if e := p.dialErr.Load(); e != nil {
			s.why = clip(*e, maxErrEcho)
		} else if !s.connected {
			s.why = "not connected"
		}
		out = append(out, s)
	}
	n.remote.mu.Unlock()
	return out
}

func peerName(id, addr string) string {
	if id == "" {
		return addr
	}
	return id + " at " + addr
}

// listPeers lists states, at most maxNamedPeers of them and how many more.
func listPeers(states []peerState) string {
	var b strings.Builder
	for i, s := range states {
		if i == maxNamedPeers {
			fmt.Fprintf(&b, " and %d more", len(states)-i)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(s.String())
	}
	return b.String()
}

// unreachableError is the error of a call whose pattern no peer in
// routing serves while peers the node knows cannot be reached, or nil
// when it reaches every peer it knows.
// A call that does not wait while some peer's catalog has not arrived yet
// (the node was just created) is told how to wait for it.
func (n *Node) unreachableError(pattern string, waiting bool) *Error {
	states := n.peerStates(true)
	if len(states) == 0 {
		return nil
	}
	e := Errorf(CodeUnavailable, "wizard: no reachable node serves %s; not reachable: %s", quoteClipped(pattern, maxEcho), listPeers(states))
	if !waiting && slices.ContainsFunc(states, func(s peerState) bool { return s.why == whyNotAnswered || s.why == whyNotLoaded }) {
		e.Message += "; a catalog has not arrived yet: call Node.WaitFor(ctx, pattern) before the first call, or make the call with WaitForReady()"
	}
	return e
}

// knownPeers says what the node knows of the mesh, for WaitFor's error.
func (n *Node) knownPeers() string {
	states := n.peerStates(false)
	if len(states) == 0 {
		if n.remote == nil {
			return "the node has no transport"
		}
		return "the node knows no peers"
	}
	slices.SortStableFunc(states, func(a, b peerState) int { // the unreachable first: they are why
		switch {
		case a.connected == b.connected:
			return 0
		case !a.connected:
			return -1
		}
		return 1
	})
	parts := make([]peerState, len(states))
	for i, s := range states {
		state := "connected"
		if !s.connected {
			state = "not connected"
			if s.why != "" {
				state += ": " + s.why
			}
		}
		parts[i] = peerState{name: s.name, why: s.transport + ", " + state}
	}
	return fmt.Sprintf("peers known (%d): %s", len(states), listPeers(parts))
}

// clip cuts s to at most max bytes (at a rune boundary), marking the cut.
func clip(s string, max int) string {
	if len(s) <= max {
		return s
	}
	i := max
	for i > 0 && s[i]&0xC0 == 0x80 {
		i--
	}
	return s[:i] + "…"
}
