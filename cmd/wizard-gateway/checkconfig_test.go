package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wizardmesh/wizard/gateway/config"
)

// TestCheckConfigServing: check-config fails, naming the section, on a
// valid file that serving would fail on (absent or unparsable TLS, key
// and gossip key files, a JWKS URL that answers no key set), and passes a
// file whose files are all there.
func TestCheckConfigServing(t *testing.T) {
	dir := t.TempDir()
	writeCert(t, dir)
	os.WriteFile(filepath.Join(dir, "hs.key"), []byte("0123456789abcdef0123456789abcdef\n"), 0o600)
	os.WriteFile(filepath.Join(dir, "junk.pem"), []byte("-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n"), 0o600)
	jwks := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(jwks.Close)
	const route = "routes:\n  - {method: GET, path: /a, pattern: \"role:a\", auth: none}\n"
	for _, tc := range []struct{ name, yaml, want string }{
		{"good", "server: {tls: {cert_file: $DIR/cert.pem, key_file: $DIR/key.pem}}\nauth: {jwt: {keys: [$DIR/hs.key], algorithms: [HS256]}}\n", ""},
		{"tls cert absent", "server: {tls: {cert_file: $DIR/absent.pem, key_file: $DIR/key.pem}}\n", "server.tls"},
		{"tls cert not PEM", "server: {tls: {cert_file: $DIR/junk.pem, key_file: $DIR/key.pem}}\n", "server.tls"},
		{"tls CA absent", "server: {tls: {cert_file: $DIR/cert.pem, key_file: $DIR/key.pem, ca_file: $DIR/absent.pem}}\n", "server.tls"},
		{"jwt key absent", "auth: {jwt: {keys: [$DIR/absent.key], algorithms: [HS256]}}\n", "auth.jwt"},
		{"jwt key not a key", "auth: {jwt: {keys: [$DIR/junk.pem], algorithms: [RS256]}}\n", "auth.jwt"},
		{"jwks not found", "auth: {jwt: {jwks_url: \"" + jwks.URL + "/jwks.json\", algorithms: [RS256]}}\n", "auth.jwt"},
		{"mesh tls absent", "mesh: {tls: {cert_file: $DIR/absent.pem, key_file: $DIR/key.pem, ca_file: $DIR/cert.pem}}\n", "mesh.tls"},
		{"gossip key file absent", "mesh: {seeds: [\"127.0.0.1:7946\"], gossip_key_file: $DIR/absent.key}\n", "mesh.gossip_key_file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_")+".yaml")
			os.WriteFile(file, []byte(strings.ReplaceAll(tc.yaml, "$DIR", dir)+route), 0o600)
			var out, errOut bytes.Buffer
			code := run([]string{"check-config", file}, noEnv, &out, &errOut, nil, nil)
			switch {
			case tc.want == "" && code != 0:
				t.Errorf("exit %d: %s", code, errOut.String())
			case tc.want != "" && (code != 1 || !strings.Contains(errOut.String(), tc.want)):
				t.Errorf("exit %d, %q %q; want 1 naming %s", code, out.String(), errOut.String(), tc.want)
			}
		})
	}
}

// writeCert writes a self-signed certificate and its key in dir
// (cert.pem, key.pem).
func writeCert(t *testing.T, dir string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "cert.pem"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(filepath.Join(dir, "key.pem"), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}), 0o600)
}

// TestMeshTLSServerName: mesh.tls.server_name is the name the gateway's
// node verifies its peers' certificates against; without it, the host
// dialled.
func TestMeshTLSServerName(t *testing.T) {
	dir := t.TempDir()
	writeCert(t, dir)
	for _, name := range []string{"", "wizard-mesh"} {
		_, client, err := meshTLS(&config.TLS{CertFile: filepath.Join(dir, "cert.pem"), KeyFile: filepath.Join(dir, "key.pem"), CAFile: filepath.Join(dir, "cert.pem"), ServerName: name})
		if err != nil {
			t.Fatal(err)
		}
		if client.ServerName != name {
			t.Errorf("server_name %q: the client's ServerName is %q", name, client.ServerName)
		}
	}
}
