package client

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// ErrNoCertificate: a CA file holds no PEM certificate.
var ErrNoCertificate = errors.New("no PEM certificate in it")

// LoadCA returns a client TLS config that verifies the master with the
// PEM certificate(s) in caFile (host name or IP of the master's address
// included).
func LoadCA(caFile string) (*tls.Config, error) {
	data, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("%s: %w", caFile, ErrNoCertificate)
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}
