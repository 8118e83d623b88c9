package master

import (
	"crypto/tls"
	"path/filepath"
	"slices"
	"strings"
	"testing"
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
	if _, err := LoadTLS(filepath.Join(dir, "no.pem"), filepath.Join(dir, "no.key")); err == nil || !strings.Contains(err.Error(), "load --tls-cert") {
		t.Errorf("missing files: %v", err)
	}
}
