package introspect

import (
	"time"

	"github.com/wizardmesh/wizard/runtime/pattern"
)

// Member is a node of the mesh as this node sees it.
type Member struct {
	// ID is the node's id: as the node itself answered in its catalog; until
	// then, as discovery announced it ("" for a peer discovery named only
	// by address).
	ID string
	// Addr is the address its transport listens on.
	Addr string
	// Digest identifies its pattern set (see the Digest of runtime/discovery's Peer).
	Digest string
	// Self marks this node.
	Self bool
	// Suspect: discovery suspects it is down; it gets no new calls while
	// another target serves the pattern.
	Suspect bool
	// Connected: this node holds a connection to it now.
	Connected bool
	// Transport names the transport its address belongs to ("tcp",
	// "quic"). A peer on another transport than this node's is listed,
	// never connected: this node cannot call it.
	Transport string
	// LastError is why the last dial to it failed (or why it is not
	// called, for a peer on another transport), while it is not
	// connected; "" otherwise.
	LastError string
	// Patterns is the number of its handlers' patterns in this node's
	// routing; Subscriptions the number of its subscriptions (a pattern
	// in a group).
	Patterns      int
	Subscriptions int
	// Segment is the gossip segment it is in: this node's, since members
	// of other segments are never seen ("" without gossip segments).
	Segment string
}

// PatternInfo is one pattern in a node's routing and the targets that
// serve it.
type PatternInfo struct {
	Pattern pattern.Pattern
	// Local: this node has a handler for it.
	Local bool
	// Remote lists the peers serving it, by id (by address when the id is
	// not known), sorted; not those discovery reported down, which are
	// called for a few seconds only when no other peer can be.
	Remote []string
}

// Route is what a node knows of the route of one pattern in its routing
// (runtime's Node.Patterns lists them): the peers serving it with their state,
// and its message types. Node.Route returns it.
type Route struct {
	Pattern pattern.Pattern
	// Local: this node has a handler for it.
	Local bool
	// Targets is what the node knows of each peer serving it (those
	// reported down included), by address.
	Targets []TargetState
	// Request and Response are the protobuf full names of its messages:
	// its local handler's, else those all its peers list ("" when untyped
	// or when they differ).
	Request, Response string
}

// TargetState is what a node knows of one peer serving a pattern.
type TargetState struct {
	ID        string
	Addr      string
	Transport string
	Connected bool
	Suspect   bool
	// Down: discovery reported it gone; it is called only when no other
	// target can be, for a few seconds.
	Down bool
	// Breaker is "open", "closed" (permits calls; a half-open breaker
	// says closed), or "" when the node has no breaker for it.
	Breaker string
	// InFlight and Latency are as runtime's Target.InFlight and Target.Latency.
	InFlight int
	Latency  time.Duration
	// Stalled: calls wait on it and it has answered none for a while;
	// the default balancer avoids it.
	Stalled bool
	// LastError is why the last dial failed, while it is not connected.
	LastError string
}

// SubscriptionInfo is one subscription in a node's routing: a pattern in
// a group, and the nodes that hold it.
type SubscriptionInfo struct {
	Pattern pattern.Pattern
	Group   string
	// Local: this node holds it.
	Local bool
	// Remote lists the peers that hold it, by id (by address when the id
	// is not known), sorted.
	Remote []string
}
