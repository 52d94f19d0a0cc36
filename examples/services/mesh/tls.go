package mesh

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"os"
)

// tlsFlags are the transport's mutual TLS: the node's certificate, for
// serving and dialling, and the CA its peers' are verified against.
type tlsFlags struct{ cert, key, ca, serverName *string }

func addTLSFlags(fs *flag.FlagSet) tlsFlags {
	return tlsFlags{
		cert:       fs.String("tls-cert", "", "a PEM certificate the node serves and dials with: mutual TLS (with -tls-key and -tls-ca)"),
		key:        fs.String("tls-key", "", "the PEM private key of -tls-cert"),
		ca:         fs.String("tls-ca", "", "the PEM CA bundle peers' certificates are verified against"),
		serverName: fs.String("tls-server-name", "", "the name peers' certificates are verified against (default: the host dialled); set it where members share a certificate name but not their addresses, such as pods"),
	}
}

// configs returns the server and client TLS the flags ask for, both nil
// for none.
func (t tlsFlags) configs() (server, client *tls.Config, err error) {
	if *t.cert == "" && *t.key == "" && *t.ca == "" && *t.serverName == "" {
		return nil, nil, nil
	}
	if *t.cert == "" || *t.key == "" || *t.ca == "" {
		return nil, nil, errors.New("-tls-cert, -tls-key and -tls-ca go together (mutual TLS)")
	}
	cert, err := tls.LoadX509KeyPair(*t.cert, *t.key)
	if err != nil {
		return nil, nil, fmt.Errorf("-tls-cert / -tls-key: %w", err)
	}
	pem, err := os.ReadFile(*t.ca)
	if err != nil {
		return nil, nil, fmt.Errorf("-tls-ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, nil, fmt.Errorf("-tls-ca %s: no PEM certificate in it", *t.ca)
	}
	server = &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS13}
	client = &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, ServerName: *t.serverName, MinVersion: tls.VersionTLS13}
	return server, client, nil
}
