package integration

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/brimnode/brim/internal/testutil"
)

// testPKI is a CA and a server certificate it signed for 127.0.0.1 and
// localhost, as PEM files.
type testPKI struct {
	ca, cert, key string
	pool          *x509.CertPool
}

// newTestPKI writes a fresh CA and server certificate under dir/name.
func newTestPKI(t *testing.T, dir, name string) testPKI {
	t.Helper()
	d := filepath.Join(dir, name)
	if err := os.MkdirAll(d, 0o700); err != nil {
		t.Fatal(err)
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "brim test CA " + name},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "brim master"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	p := testPKI{ca: filepath.Join(d, "ca.pem"), cert: filepath.Join(d, "cert.pem"), key: filepath.Join(d, "key.pem"), pool: x509.NewCertPool()}
	p.pool.AddCert(caCert)
	for file, block := range map[string]*pem.Block{
		p.ca:   {Type: "CERTIFICATE", Bytes: caDER},
		p.cert: {Type: "CERTIFICATE", Bytes: der},
		p.key:  {Type: "EC PRIVATE KEY", Bytes: keyDER},
	} {
		if err := os.WriteFile(file, pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// TestMasterTLS: `brim master --tls-cert --tls-key` serves gRPC and the
// HTTP API over TLS on its one port. Half a flag pair exits 2, a key that
// does not load exits 1 naming the files; plain HTTP gets no answer; with
// --master-ca, `brim state` reads /state (HTTPS, HTTP/1.1 chosen for it
// though Go's client offers h2 too), `brim dev --join` registers an agent
// and `brim run` runs a task on it; without --master-ca, or with another
// CA's certificate, neither the CLI nor an agent gets through, and the
// agent's log names the certificate problem.
func TestMasterTLS(t *testing.T) {
	testutil.RequireRoot(t)
	dir := t.TempDir()
	pki := newTestPKI(t, dir, "good")
	other := newTestPKI(t, dir, "other")
	noCgroup := "/" + testutil.UniqueName("brim-test")

	r := runBrimBounded(t, noCgroup, "master", "--listen", testutil.FreeAddr(t), "--state-dir", filepath.Join(dir, "half"), "--tls-cert", pki.cert)
	if r.code != 2 || !strings.Contains(r.stderr, "--tls-cert and --tls-key go together") {
		t.Fatalf("master with --tls-cert alone: exit %d, want 2 and the reason:\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runBrimBounded(t, noCgroup, "master", "--listen", testutil.FreeAddr(t), "--state-dir", filepath.Join(dir, "badkey"), "--tls-cert", pki.cert, "--tls-key", other.key)
	if r.code != 1 || !strings.Contains(r.stderr, "load --tls-cert "+pki.cert) {
		t.Fatalf("master with a key of another certificate: exit %d, want 1 naming the files:\n%s%s", r.code, r.stdout, r.stderr)
	}

	m := startMasterWith(t, &tls.Config{RootCAs: pki.pool}, "--tls-cert", pki.cert, "--tls-key", pki.key)
	if resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + m.Addr + "/state"); err == nil {
		resp.Body.Close()
		t.Fatalf("plain HTTP to the TLS port answered: %s", resp.Status)
	}
	resp, err := m.http.Get(m.url + "/state")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Proto != "HTTP/1.1" || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /state over TLS: %s %s, want HTTP/1.1 200", resp.Proto, resp.Status)
	}

	r = runBrimBounded(t, noCgroup, "state", "--master", m.Addr, "--master-ca", pki.ca)
	if r.code != 0 {
		t.Fatalf("brim state --master-ca: exit %d:\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, ca := range []string{"", other.ca} {
		args := []string{"state", "--master", m.Addr}
		if ca != "" {
			args = append(args, "--master-ca", ca)
		}
		if r := runBrimBounded(t, noCgroup, args...); r.code != 1 || !strings.Contains(r.stderr, "cannot reach the master") {
			t.Errorf("brim %v: exit %d, want 1 (cannot reach the master):\n%s%s", args, r.code, r.stdout, r.stderr)
		}
	}
	if r := runBrimBounded(t, noCgroup, "state", "--master", m.Addr, "--master-ca", filepath.Join(dir, "missing.pem")); r.code != 2 || !strings.Contains(r.stderr, "--master-ca") {
		t.Errorf("brim state with a missing --master-ca file: exit %d, want 2 naming the flag:\n%s%s", r.code, r.stdout, r.stderr)
	}

	startLinkedAgent(t, m.Addr, "--master-ca", pki.ca)
	bad := startLinkedAgent(t, m.Addr, "--master-ca", other.ca)
	plain := startLinkedAgent(t, m.Addr)
	tlsAgents := func() int { return len(fetchState(t, m.http, m.url).Agents) }
	deadline := time.Now().Add(30 * time.Second)
	for tlsAgents() < 1 {
		if time.Now().After(deadline) {
			t.Fatal("the agent with --master-ca did not register over TLS in 30 s")
		}
		time.Sleep(100 * time.Millisecond)
	}

	run := startRun(t, m.Addr, "--master-ca", pki.ca, "--cpus", "0.1", "--mem", "32", "--", "sh", "-c", "exit 0")
	if code := run.wait(t); code != 0 || !strings.Contains(run.output(), "FINISHED") {
		t.Fatalf("brim run over TLS: exit %d:\n%s", code, run.output())
	}
	t.Logf("brim run over TLS:\n%s", run.output())

	// The other two have retried for a while by now.
	deadline = time.Now().Add(10 * time.Second)
	for _, p := range []struct {
		a    *agentProc
		want string
	}{{bad, "certificate signed by unknown authority"}, {plain, "master link down"}} {
		for {
			log, _ := os.ReadFile(p.a.logPath)
			if i := strings.Index(string(log), p.want); i >= 0 {
				line := string(log)[max(0, strings.LastIndex(string(log[:i]), "\n")+1):]
				t.Logf("%s", line[:strings.IndexByte(line+"\n", '\n')])
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("agent log does not say %q:\n%s", p.want, log)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	if n := tlsAgents(); n != 1 {
		t.Errorf("%d agents registered, want only the one with the right CA", n)
	}
}
