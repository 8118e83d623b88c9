package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/brimnode/brim/cli"
)

func TestTLSFlagErrors(t *testing.T) {
	dir := t.TempDir()
	var ee cli.ExitError
	if _, _, err := serverTLS("cert.pem", ""); !errors.As(err, &ee) || ee.Code != 2 {
		t.Errorf("--tls-cert alone: %v, want exit 2", err)
	}
	if cfg, _, err := serverTLS("", ""); cfg != nil || err != nil {
		t.Errorf("no TLS flags: %v, %v", cfg, err)
	}
	if _, _, err := serverTLS(filepath.Join(dir, "no.pem"), filepath.Join(dir, "no.key")); err == nil || !strings.Contains(err.Error(), "load --tls-cert") {
		t.Errorf("missing files: %v", err)
	}
	notPEM := filepath.Join(dir, "ca.txt")
	if err := os.WriteFile(notPEM, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{filepath.Join(dir, "missing.pem"), notPEM} {
		m := cli.MasterTLS{CAFile: f}
		if _, err := m.DialOptions(); !errors.As(err, &ee) || ee.Code != 2 || !strings.Contains(ee.Msg, "--master-ca") {
			t.Errorf("--master-ca %s: %v, want exit 2 naming the flag", f, err)
		}
	}
	if d, err := (&cli.MasterTLS{}).DialOptions(); d != nil || err != nil {
		t.Errorf("no --master-ca: %v, %v", d, err)
	}
}
