// Package testpki makes a throwaway certificate authority for tests: an
// ECDSA CA with a server and a client certificate for 127.0.0.1 and
// localhost, node certificates that name a node id (wizard://node/<id>),
// and ready TLS configurations. It is for tests only.
package testpki
