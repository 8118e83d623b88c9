package testregistry

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"golang.org/x/crypto/bcrypt"

	"github.com/brimnode/brim/internal/testutil"
)

// Binary is Debian's registry (package docker-registry).
const Binary = "/usr/bin/docker-registry"

// Options shape a registry.
type Options struct {
	// TLS serves HTTPS with a certificate for 127.0.0.1 and localhost,
	// signed by a CA made for this registry (Registry.CAFile).
	TLS bool
	// Users turns on basic auth: user name to password.
	Users map[string]string
}

// Registry is a running registry. Its fields are read-only.
type Registry struct {
	// Host is 127.0.0.1:PORT, the host part of its references.
	Host string
	// CAFile is the PEM file of the CA that signed its certificate
	// (TLS only).
	CAFile string
	// Dir is its storage root (the filesystem driver's rootdirectory).
	Dir string

	opts Options
	tr   http.RoundTripper
}

// Start starts a registry and stops it when t ends. It fails t (skips
// outside CI) when docker-registry is not installed.
func Start(t testing.TB, opts Options) *Registry {
	t.Helper()
	_, err := os.Stat(Binary)
	testutil.Require(t, err == nil, "docker-registry not installed (hack/deps.sh installs it)")
	dir := t.TempDir()
	r := &Registry{Host: testutil.FreeAddr(t), Dir: filepath.Join(dir, "storage"), opts: opts}
	cfg := fmt.Sprintf(`version: 0.1
log:
  level: error
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: %s
  delete:
    enabled: true
http:
  addr: %s
  secret: %s
`, r.Dir, r.Host, testutil.UniqueName("secret"))
	r.tr = http.DefaultTransport
	if opts.TLS {
		cert, key, pool := makeCerts(t, dir)
		r.CAFile = filepath.Join(dir, "ca.pem")
		cfg += fmt.Sprintf("  tls:\n    certificate: %s\n    key: %s\n", cert, key)
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		r.tr = tr
	}
	if len(opts.Users) > 0 {
		cfg += fmt.Sprintf("auth:\n  htpasswd:\n    realm: brim-test\n    path: %s\n", writeHtpasswd(t, dir, opts.Users))
	}
	cfgPath := filepath.Join(dir, "config.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	r.run(t, cfgPath, filepath.Join(dir, "registry.log"))
	return r
}

func (r *Registry) run(t testing.TB, cfgPath, logPath string) {
	t.Helper()
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(Binary, "serve", cfgPath)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("start docker-registry: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		_ = logf.Close()
	})
	if err := r.waitReady(done); err != nil {
		b, _ := os.ReadFile(logPath)
		t.Fatalf("docker-registry on %s: %v; its log:\n%s", r.Host, err, b)
	}
}

// waitReady polls /v2/ until the registry answers (200, or 401 with auth).
func (r *Registry) waitReady(exited <-chan struct{}) error {
	c := &http.Client{Transport: r.tr, Timeout: 2 * time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return fmt.Errorf("exited at start")
		default:
		}
		resp, err := c.Get(r.URL() + "/v2/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusUnauthorized {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("not ready in 30 s")
}

// URL is the registry's base URL.
func (r *Registry) URL() string {
	if r.opts.TLS {
		return "https://" + r.Host
	}
	return "http://" + r.Host
}

// Ref is repo:tag (or repo@digest) on this registry.
func (r *Registry) Ref(repoTag string) string { return r.Host + "/" + repoTag }

// Push pushes img as repoTag and returns its manifest digest.
func (r *Registry) Push(t testing.TB, repoTag string, img v1.Image) string {
	t.Helper()
	ref := r.parse(t, repoTag)
	if err := remote.Write(ref, img, r.remoteOptions()...); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}

// PushIndex pushes a multi-arch index (and its images) as repoTag and
// returns the index's digest.
func (r *Registry) PushIndex(t testing.TB, repoTag string, idx v1.ImageIndex) string {
	t.Helper()
	ref := r.parse(t, repoTag)
	if err := remote.WriteIndex(ref, idx, r.remoteOptions()...); err != nil {
		t.Fatalf("push index %s: %v", ref, err)
	}
	d, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}

func (r *Registry) parse(t testing.TB, repoTag string) name.Reference {
	t.Helper()
	var opts []name.Option
	if !r.opts.TLS {
		opts = append(opts, name.Insecure)
	}
	ref, err := name.ParseReference(r.Ref(repoTag), opts...)
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

func (r *Registry) remoteOptions() []remote.Option {
	opts := []remote.Option{remote.WithTransport(r.tr), remote.WithContext(context.Background())}
	for u, p := range r.opts.Users {
		opts = append(opts, remote.WithAuth(&authn.Basic{Username: u, Password: p}))
		break
	}
	return opts
}

// BlobPath is where the registry keeps a blob's bytes: a test corrupts
// them there to check that a client verifies what it is served.
func (r *Registry) BlobPath(digest string) string {
	hex := strings.TrimPrefix(digest, "sha256:")
	return filepath.Join(r.Dir, "docker/registry/v2/blobs/sha256", hex[:2], hex, "data")
}

// AuthFile writes a Docker-style auth.json with the registry's users
// (the first one) and returns its path.
func (r *Registry) AuthFile(t testing.TB, user, password string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "auth.json")
	tok := base64Std(user + ":" + password)
	body := fmt.Sprintf(`{"auths": {%q: {"auth": %q}}}`, r.Host, tok)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func writeHtpasswd(t testing.TB, dir string, users map[string]string) string {
	t.Helper()
	var b strings.Builder
	for u, p := range users {
		h, err := bcrypt.GenerateFromPassword([]byte(p), bcrypt.MinCost)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s:%s\n", u, h)
	}
	p := filepath.Join(dir, "htpasswd")
	if err := os.WriteFile(p, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// makeCerts writes a CA and a server certificate for 127.0.0.1, ::1 and
// localhost signed by it; it returns the certificate and key files and
// a pool holding the CA.
func makeCerts(t testing.TB, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "brim test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	writePEM(t, certFile, "CERTIFICATE", der)
	writePEM(t, keyFile, "EC PRIVATE KEY", keyDER)
	writePEM(t, filepath.Join(dir, "ca.pem"), "CERTIFICATE", caDER)
	pool = x509.NewCertPool()
	pool.AddCert(ca)
	return certFile, keyFile, pool
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
