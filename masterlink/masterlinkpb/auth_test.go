package masterlinkpb

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"
)

// TestBasicCredentials: the header is what the master's authentication
// parses, "Basic base64(principal:secret)", and no TLS is demanded.
func TestBasicCredentials(t *testing.T) {
	c := BasicCredentials("fw", "s:e:cret")
	md, err := c.GetRequestMetadata(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	h, ok := strings.CutPrefix(md["authorization"], "Basic ")
	if !ok || len(md) != 1 {
		t.Fatalf("metadata %v, want one authorization: Basic …", md)
	}
	raw, err := base64.StdEncoding.DecodeString(h)
	if err != nil || string(raw) != "fw:s:e:cret" {
		t.Fatalf("credentials %q (%v), want fw:s:e:cret", raw, err)
	}
	if c.RequireTransportSecurity() {
		t.Fatal("BasicCredentials demand TLS; the master serves TLS only with --tls-cert")
	}
}
