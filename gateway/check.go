package gateway

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"

	"github.com/wizardmesh/wizard/gateway/config"
)

// Check builds what [New] and [Gateway.Serve] would build from cfg,
// short of the node, and returns why serving would fail, or nil: the
// JWT verifier (its key files read and parsed, its JWKS fetched and
// parsed) and server.tls's certificate, key and CA. A valid file
// ([config.Check]) can still name files that are absent or are not
// keys; `wizard-gateway check-config` runs both.
func Check(cfg *config.Config) error {
	if cfg == nil {
		return errors.New("wizard: gateway: Check: a nil configuration")
	}
	var errs []error
	if cfg.Auth.JWT != nil {
		if v, closer, err := verifierOf(nil, config.Auth{JWT: cfg.Auth.JWT}); err != nil {
			errs = append(errs, fmt.Errorf("auth.jwt: %w", err))
		} else if v != nil {
			closer.Close()
		}
	}
	if t := cfg.Server.TLS; t != nil {
		if err := checkTLSFiles(t.CertFile, t.KeyFile, t.CAFile); err != nil {
			errs = append(errs, fmt.Errorf("server.tls: %w", err))
		}
	}
	return errors.Join(errs...)
}

// checkTLSFiles loads a PEM certificate chain and its key, and a CA
// bundle when caFile is not "", as serving them would.
func checkTLSFiles(certFile, keyFile, caFile string) error {
	if _, err := tls.LoadX509KeyPair(certFile, keyFile); err != nil {
		return err
	}
	if caFile == "" {
		return nil
	}
	ca, err := os.ReadFile(caFile)
	if err != nil {
		return err
	}
	if !x509.NewCertPool().AppendCertsFromPEM(ca) {
		return fmt.Errorf("%s holds no PEM certificate", caFile)
	}
	return nil
}
