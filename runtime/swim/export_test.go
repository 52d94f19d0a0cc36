package swim

import "github.com/hashicorp/memberlist"

// Crash stops gossip the way a crash would: no leave message, memberlist
// shut down; the node's transport is untouched.
func (d *Discovery) Crash() { _ = d.stop(false) }

// NumMembers is the number of live members this node's memberlist knows,
// itself included.
func (d *Discovery) NumMembers() int {
	d.mu.Lock()
	ml := d.ml
	d.mu.Unlock()
	if ml == nil {
		return 0
	}
	return ml.NumMembers()
}

// JoinAttempts is the number of join attempts made so far.
func (d *Discovery) JoinAttempts() int64 { return d.joinAttempts.Load() }

// Meta is the NodeMeta this node gossips now.
func (d *Discovery) Meta() []byte {
	if p := d.meta.Load(); p != nil {
		return *p
	}
	return nil
}

// MemberlistConfig is the configuration memberlist runs with.
func (d *Discovery) MemberlistConfig() *memberlist.Config { return d.mlConfig }

// DecodedMeta decodes b, for tests outside the package.
func DecodedMeta(b []byte) (protocol uint8, addr, transport, segment, digest string, err error) {
	m, err := decodeMeta(b)
	return m.Protocol, m.Addr, m.Transport, m.Segment, m.Digest, err
}

// Partition makes the gossip addresses ("ip:port") blocked reports
// unreachable from and to this node, as a partition of the network would:
// UDP both ways, TCP dialled by this node (block the other side too, so
// that it dials no stream in). Heal ends it.
func (d *Discovery) Partition(blocked func(addr string) bool) { d.tr.block(blocked) }

// Heal ends a Partition.
func (d *Discovery) Heal() { d.tr.block(nil) }

// Known is the number of members memberlist's table holds, itself
// included: live members, and dead or left ones not yet forgotten.
func (d *Discovery) Known() int {
	r, err := newStateReader(d.ml)
	if err != nil {
		panic(err)
	}
	return len(r.states())
}
