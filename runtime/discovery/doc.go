// Package discovery is the contract between a wizard node and what finds
// its peers: the interfaces a discovery implements and the [Peer] records
// it reports.
//
// A service author picks a discovery and gives it to a node with
// runtime.WithDiscovery: runtime.StaticPeers (fixed addresses, no
// gossip), runtime/swim (gossip), runtime/nats (a broker's), or [Multi]
// for several at once. This package is for those who write one.
//
// # Implementing a discovery
//
// A [Discovery] is started once by the node it is given to, with the
// node's [Host], and closed when the node shuts down. It reports peers
// with [Host.PeerUp] (a peer appeared or changed: address, id, instance,
// transport, pattern digest, suspicion) and [Host.PeerDown] (a peer left
// or died); the node dials, pulls catalogs and routes. [Host.Self]
// describes the node itself, for a discovery that announces it; such a
// discovery also implements [SelfAnnouncer], so that the node tells it
// when its patterns change. One that sees a segment of the mesh only
// implements [Segmented], and the node's members carry the segment's name.
//
// The node routes a peer only once the peer itself has stated its
// patterns and id over its own connection: what a discovery reports says
// where to dial and whom to expect, never what to route.
package discovery
