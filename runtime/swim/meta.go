package swim

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
)

// The NodeMeta every member gossips is compact and bounded: memberlist
// carries it in every alive message and panics on more than
// [memberlist.MetaMaxSize] (512) bytes. Its layout:
//
//	byte 0     layout version (metaLayout)
//	byte 1     wizard protocol version the node speaks (protocolVersion)
//	then four fields, each one length byte followed by that many bytes:
//	           RPC address, transport name, segment, pattern-set digest
//
// The field limits below keep any valid encoding at or under
// 2 + 4 + 255 + 32 + 128 + 64 = 485 bytes, so no valid meta can reach
// memberlist's limit; encodeMeta and decodeMeta enforce the same limits.
const (
	metaLayout      = 1
	protocolVersion = 1

	maxAddrLen      = 255
	maxTransportLen = 32
	maxSegmentLen   = 128
	maxDigestLen    = 64

	// maxMetaLen is the longest valid encoding.
	maxMetaLen = 2 + 4 + maxAddrLen + maxTransportLen + maxSegmentLen + maxDigestLen
)

// metaMaxSize mirrors memberlist.MetaMaxSize, checked in a test.
const metaMaxSize = 512

// meta is what one member tells the others about itself.
type meta struct {
	Protocol  uint8
	Addr      string // host:port of its wizard transport; empty: it serves nothing
	Transport string // "tcp", "quic"; empty means the receiver's own
	Segment   string
	Digest    string // of its pattern set; empty means unknown
}

// errMeta marks a malformed or oversized NodeMeta.
var errMeta = errors.New("wizard: swim: bad node meta")

// check reports the first field that breaks a limit.
func (m *meta) check() error {
	switch {
	case len(m.Addr) > maxAddrLen:
		return fmt.Errorf("%w: rpc address is %d bytes, the limit is %d", errMeta, len(m.Addr), maxAddrLen)
	case len(m.Transport) > maxTransportLen:
		return fmt.Errorf("%w: transport name is %d bytes, the limit is %d", errMeta, len(m.Transport), maxTransportLen)
	case len(m.Segment) > maxSegmentLen:
		return fmt.Errorf("%w: segment is %d bytes, the limit is %d", errMeta, len(m.Segment), maxSegmentLen)
	case len(m.Digest) > maxDigestLen:
		return fmt.Errorf("%w: pattern-set digest is %d bytes, the limit is %d", errMeta, len(m.Digest), maxDigestLen)
	}
	return nil
}

// encodeMeta returns m's encoding, or an error naming the field that is
// too long; the result never exceeds maxMetaLen bytes.
func encodeMeta(m meta) ([]byte, error) {
	if err := m.check(); err != nil {
		return nil, err
	}
	b := make([]byte, 0, 2+4+len(m.Addr)+len(m.Transport)+len(m.Segment)+len(m.Digest))
	b = append(b, metaLayout, m.Protocol)
	for _, f := range [...]string{m.Addr, m.Transport, m.Segment, m.Digest} {
		b = append(b, byte(len(f)))
		b = append(b, f...)
	}
	return b, nil
}

// decodeMeta parses an encoding made by encodeMeta. It rejects anything
// else (unknown layout, truncated or trailing bytes, fields over their
// limits) with an error wrapping errMeta, and never panics.
func decodeMeta(b []byte) (meta, error) {
	if len(b) == 0 {
		return meta{}, fmt.Errorf("%w: empty", errMeta)
	}
	if b[0] != metaLayout {
		return meta{}, fmt.Errorf("%w: unknown layout version %d", errMeta, b[0])
	}
	if len(b) < 2 {
		return meta{}, fmt.Errorf("%w: truncated after the layout version", errMeta)
	}
	m := meta{Protocol: b[1]}
	rest := b[2:]
	names := [...]string{"rpc address", "transport name", "segment", "pattern-set digest"}
	var fields [4]string
	for i := range fields {
		if len(rest) == 0 {
			return meta{}, fmt.Errorf("%w: truncated before the %s", errMeta, names[i])
		}
		n := int(rest[0])
		if len(rest)-1 < n {
			return meta{}, fmt.Errorf("%w: %s of %d bytes, only %d left", errMeta, names[i], n, len(rest)-1)
		}
		fields[i] = string(rest[1 : 1+n])
		rest = rest[1+n:]
	}
	if len(rest) != 0 {
		return meta{}, fmt.Errorf("%w: %d trailing bytes", errMeta, len(rest))
	}
	m.Addr, m.Transport, m.Segment, m.Digest = fields[0], fields[1], fields[2], fields[3]
	if err := m.check(); err != nil {
		return meta{}, err
	}
	return m, nil
}

// rpcAddr is addr as other members can dial it: a listener on every
// interface ("0.0.0.0:7000", "[::]:7000", ":7000") is reached through the
// address this node advertises for gossip.
func rpcAddr(addr string, gossipIP net.IP) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || gossipIP == nil {
		return addr
	}
	if host != "" {
		ip, err := netip.ParseAddr(host)
		if err != nil || !ip.IsUnspecified() {
			return addr
		}
	}
	return net.JoinHostPort(gossipIP.String(), port)
}
