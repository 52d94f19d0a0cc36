package discovery

// Peer describes a node as discovery reports it. Discovery says where to
// dial a node and whom to expect there; a node routes a peer's patterns
// only once the peer itself has stated them, pulled over its own
// connection, and knows it by the id and instance it answers with. Those
// must be an ID and Instance announced at that address, or a new run of
// an ID announced there whose instance was not announced at another
// address: a peer that answers as another node (relaying its catalog) is
// not routed, is warned of once, and is dialled again only when discovery
// reports something new of the address.
type Peer struct {
	// ID is the node's id, if known.
	ID string
	// Instance identifies one run of the node, if known: a node restarted
	// under the same id (and maybe the same address) has a new instance. A
	// PeerDown for an instance other than the one known at that address is
	// ignored, so a late death notice never removes the node's next run.
	Instance string
	// Addr is the address its transport listens on.
	Addr string
	// Transport names the transport Addr belongs to ("tcp", "quic"); empty
	// means this node's own. A node never calls a peer on another
	// transport: it logs a warning once per address, lists the peer in
	// runtime's Node.Members (not connected) and names it in the errors of calls
	// it cannot route.
	Transport string
	// Digest identifies the peer's pattern set: a short hash of its
	// patterns in canonical form, at most 32 bytes. A node pulls a peer's
	// catalog when it sees a digest it has not seen before; nodes with the
	// same digest share one cached catalog, and the pull of a digest cached
	// is answered by the digest alone. Empty means unknown: the node pulls
	// the catalog and refreshes it periodically.
	Digest string
	// Suspect says discovery suspects the peer is down. A suspect peer gets
	// no new calls while another target serves the pattern.
	Suspect bool
}

// Discovery finds other nodes. runtime.StaticPeers is the simplest; runtime/swim
// gossips. A node calls Start once, when it is created, and Close when it
// shuts down.
type Discovery interface {
	Start(host Host) error
	Close() error
}

// Host is the node's side of [Discovery]: discovery reports peers
// that appear or change and peers that leave. Its methods are safe for
// concurrent use and do not block on the network.
type Host interface {
	// Self describes this node: id, listen address, transport and the
	// digest of its current pattern set.
	Self() Peer
	// PeerUp reports a peer that appeared or changed (address, digest,
	// suspicion): the node connects to it and pulls its catalog when the
	// digest is new to it. A peer that answered once and went away is
	// dialled again every 10 s at most; one that never answered, ever more
	// slowly, up to once a minute; one named by ID or Instance is given up
	// after 16 attempts (two to four minutes), until a PeerUp brings another
	// Instance, ID or Digest for it.
	PeerUp(p Peer)
	// PeerDown reports a peer that left or died: it gets no new calls at
	// once while another target serves the pattern, and for 5 s it is the
	// last resort over the connection it has (a death notice may be stale:
	// gossip after a partition heals); then it is forgotten. A PeerDown
	// whose Instance differs from the one the node knows at that address
	// (a restarted node reusing it) is ignored.
	PeerDown(p Peer)
}

// SelfAnnouncer is implemented by a [Discovery] that announces this node's
// pattern set to others. The node calls SelfChanged after its local
// patterns change; the discovery then reads [Host.Self] again and
// re-announces. SelfChanged must not block.
type SelfAnnouncer interface {
	SelfChanged()
}

// Segmented is implemented by a [Discovery] whose view of the mesh is one
// segment of it (runtime/swim's gossip segments): every member it reports
// is in the node's own segment, which Segment names. runtime's
// Node.Members lists it as each member's segment.
type Segmented interface {
	Segment() string
}
