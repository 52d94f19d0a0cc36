package runtime

import (
	"crypto/x509"
	"net/url"
	"strings"
)

// A certificate names a node id by a URI SAN of the form
// wizard://node/<id>: a CA that issues a node's certificate with it binds
// that id to the node's key. Under TLS, a caller routes a peer whose
// server certificate names an id only while the peer's catalog answers
// as that id; under mutual TLS, a handler sees the id the caller's
// certificate names as [Source].Node. The id is the URI's path without
// its leading slash, percent-decoded.
const (
	nodeURIScheme = "wizard"
	nodeURIHost   = "node"
)

// NodeURI returns the URI by which a certificate names node id:
// wizard://node/<id>. Put it in the certificate template's URIs; a node
// that verifies the certificate reads the id from its first such URI
// ([Identity] Node).
func NodeURI(id string) *url.URL {
	return &url.URL{Scheme: nodeURIScheme, Host: nodeURIHost, Path: "/" + id}
}

// certificateNodeID returns the node id c names by its first URI SAN of
// the form wizard://node/<id> (see [NodeURI]), or "" when it names none.
func certificateNodeID(c *x509.Certificate) string {
	if c == nil {
		return ""
	}
	for _, u := range c.URIs {
		if u.Scheme == nodeURIScheme && u.Host == nodeURIHost && u.User == nil && len(u.Path) > 1 {
			return strings.TrimPrefix(u.Path, "/")
		}
	}
	return ""
}

// WithRequirePeerIdentity routes only the peers whose connection proves a
// node id: a verified server certificate that names one (see [NodeURI])
// and a catalog that answers as it. Without it, a peer whose certificate
// names no id is routed on what discovery announced alone; with it, such
// a peer is not routed, nor is any peer over a transport whose
// connections prove no certificate (plain TCP, a broker; see
// [PeerCertificateConn]). For a mesh under TLS whose CA names every
// node's id in its certificate.
func WithRequirePeerIdentity() Option {
	return nodeOption(func(c *nodeConfig) { c.requirePeerIdentity = true })
}

// certifiedID returns the node id the verified certificate of conn's peer
// names, "" for none.
func certifiedID(conn Conn) string {
	if pc, ok := conn.(PeerCertificateConn); ok {
		return certificateNodeID(pc.PeerCertificate())
	}
	return ""
}

// forgedCaller returns a permission_denied error when the verified
// certificate of m's caller names a node id and m states another as its
// caller (or none), else nil: a caller cannot speak as another node than
// the one its certificate names.
func forgedCaller(m *Message) error {
	if m.Remote == nil {
		return nil
	}
	id := m.Remote.identity()
	if id == nil || id.Node == "" {
		return nil
	}
	if stated := metaValue(m.Meta, metaCaller); stated != id.Node {
		return Errorf(CodePermissionDenied, "wizard: the caller states node id %s, its certificate names %s",
			quoteClipped(stated, maxEcho), quoteClipped(id.Node, maxEcho))
	}
	return nil
}
