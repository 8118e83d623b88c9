package transport

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestServerTLSALPN: the master's config per client hello. Only a client
// that offers h2 without http/1.1 (gRPC) gets h2; every other gets
// http/1.1, so that it speaks to the HTTP API.
func TestServerTLSALPN(t *testing.T) {
	cfg := &tls.Config{}
	pick := serverALPN(cfg)
	for _, tc := range []struct {
		offered []string
		want    string
	}{
		{[]string{"h2"}, "h2"},
		{[]string{"h2", "http/1.1"}, "http/1.1"},
		{[]string{"http/1.1", "h2"}, "http/1.1"},
		{[]string{"http/1.1"}, "http/1.1"},
		{nil, "http/1.1"},
	} {
		got, err := pick(&tls.ClientHelloInfo{SupportedProtos: tc.offered})
		if err != nil || !slices.Equal(got.NextProtos, []string{tc.want}) {
			t.Errorf("client offers %v: server offers %v (%v), want [%s]", tc.offered, got.NextProtos, err, tc.want)
		}
	}
}

func TestLoadTLSMissingFiles(t *testing.T) {
	dir := t.TempDir()
	if _, _, err := LoadTLS(filepath.Join(dir, "no.pem"), filepath.Join(dir, "no.key")); err == nil || !strings.Contains(err.Error(), "load --tls-cert") {
		t.Errorf("missing files: %v", err)
	}
}

// writeSelfSigned writes a fresh self-signed certificate and key for cn.
func writeSelfSigned(t *testing.T, certFile, keyFile, cn string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// Reload swaps the certificate new handshakes get; a pair that does not
// load keeps the one in force (SIGHUP, issue 15).
func TestCertificateReload(t *testing.T) {
	dir := t.TempDir()
	cf, kf := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	writeSelfSigned(t, cf, kf, "first")
	cfg, c, err := LoadTLS(cf, kf)
	if err != nil {
		t.Fatal(err)
	}
	served := func() string {
		t.Helper()
		perClient, err := cfg.GetConfigForClient(&tls.ClientHelloInfo{SupportedProtos: []string{"h2"}})
		if err != nil {
			t.Fatal(err)
		}
		cert, err := perClient.GetCertificate(&tls.ClientHelloInfo{})
		if err != nil {
			t.Fatal(err)
		}
		leaf, err := x509.ParseCertificate(cert.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		return leaf.Subject.CommonName
	}
	if got := served(); got != "first" {
		t.Fatalf("served %q", got)
	}
	writeSelfSigned(t, cf, kf, "second")
	if err := c.Reload(); err != nil {
		t.Fatal(err)
	}
	if got := served(); got != "second" {
		t.Errorf("after reload: served %q, want second", got)
	}
	if err := os.WriteFile(kf, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := c.Reload(); err == nil || !strings.Contains(err.Error(), "load --tls-cert") {
		t.Errorf("reload of a broken pair: %v", err)
	}
	if got := served(); got != "second" {
		t.Errorf("after a failed reload: served %q, want second (kept)", got)
	}
}
