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
