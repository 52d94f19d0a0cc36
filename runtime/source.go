package runtime

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"sync"
)

// Source is who made the call a handler serves, as the serving node knows
// it: values the caller's metadata cannot override. [Request.Source]
// returns it.
type Source struct {
	// Node is the calling node's id: the one its verified certificate
	// names (Identity.Node, see [NodeURI]) when it names one, else as the
	// caller states it; in-process, this node's own id. Only an id its
	// certificate names is verified.
	Node string
	// Transport names the transport the call came over ("tcp", "quic"); ""
	// in-process.
	Transport string
	// Addr is the caller's network address as the transport saw it; ""
	// in-process.
	Addr string
	// Identity is the certificate the caller presented and the transport
	// verified (mutual TLS); nil without one, and in-process.
	Identity *Identity
}

// Identity is what a transport verified of a caller: its certificate's
// names, as an authorization decision reads them.
type Identity struct {
	// Subject is the certificate's subject in RFC 2253 form, such as
	// "CN=orders,O=shop".
	Subject string
	// Node is the node id the certificate names (see [NodeURI]), "" for
	// none.
	Node           string
	DNSNames       []string
	URIs           []string // URI SANs, such as SPIFFE ids
	EmailAddresses []string
	IPAddresses    []string
	// Fingerprint is the hex SHA-256 of the certificate (DER).
	Fingerprint string
	// Certificate is the verified leaf certificate.
	Certificate *x509.Certificate
}

// Remote is what a [Transport] knows of the calling end of one of its
// connections: a transport makes one per connection with [NewRemote] and
// sets it as [Message].Remote on every call it serves from that
// connection.
type Remote struct {
	transport, addr string
	identity        func() *Identity
}

// NewRemote returns the Remote of a connection from addr over transport.
// state, if not nil, gives the connection's TLS state: it is read once, on
// first use (the handshake may not have run when the connection is
// accepted), and a certificate the caller presented and the TLS
// configuration verified becomes the [Source]'s Identity.
func NewRemote(transport, addr string, state func() tls.ConnectionState) *Remote {
	r := &Remote{transport: transport, addr: addr, identity: func() *Identity { return nil }}
	if state != nil {
		r.identity = sync.OnceValue(func() *Identity { return identityOf(state()) })
	}
	return r
}

// identityOf is the verified identity of the peer of a TLS connection, or
// nil.
func identityOf(cs tls.ConnectionState) *Identity {
	if len(cs.PeerCertificates) == 0 || len(cs.VerifiedChains) == 0 {
		return nil
	}
	c := cs.PeerCertificates[0]
	sum := sha256.Sum256(c.Raw)
	id := &Identity{
		Subject:        c.Subject.String(),
		Node:           certificateNodeID(c),
		DNSNames:       c.DNSNames,
		EmailAddresses: c.EmailAddresses,
		Fingerprint:    hex.EncodeToString(sum[:]),
		Certificate:    c,
	}
	for _, u := range c.URIs {
		id.URIs = append(id.URIs, u.String())
	}
	for _, ip := range c.IPAddresses {
		id.IPAddresses = append(id.IPAddresses, ip.String())
	}
	return id
}

// Source returns who made the call the handler serves (see [Source]). It
// is valid while the handler runs.
func (r Request) Source() Source {
	var call *Message
	switch m := r.msg.(type) {
	case *raw:
		call = m.call
	case *serverStream:
		call = m.call
	}
	if call == nil {
		if r.node == nil {
			return Source{}
		}
		return Source{Node: r.node.id}
	}
	s := Source{Node: metaValue(call.Meta, metaCaller)}
	if rm := call.Remote; rm != nil {
		s.Transport, s.Addr, s.Identity = rm.transport, rm.addr, rm.identity()
		if s.Identity != nil && s.Identity.Node != "" {
			s.Node = s.Identity.Node // proven, whatever the caller states
		}
	}
	return s
}
