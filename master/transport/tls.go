package transport

import (
	"crypto/tls"
	"fmt"
	"slices"
	"sync/atomic"
)

// TLS on the master's one port. Server routes each connection by its
// first bytes; under TLS those bytes are only readable after the
// handshake, and its ALPN choice must already suit the protocol that
// follows: gRPC needs "h2", and an HTTP client offered "h2" would speak
// HTTP/2 too and be routed to the gRPC server. So the master picks per
// client hello: a client that offers "h2" and not "http/1.1" (grpc-go
// offers only "h2") gets "h2"; any other (curl, Go's net/http, browsers)
// gets "http/1.1".

// LoadTLS loads the master's certificate (chain) and key, PEM files, into
// a server config with that ALPN choice: wrap Serve's listener with
// tls.NewListener.
// The certificate is read again by the returned Certificate's Reload
// (the master's SIGHUP): new handshakes use the new one.
func LoadTLS(certFile, keyFile string) (*tls.Config, *Certificate, error) {
	c := &Certificate{certFile: certFile, keyFile: keyFile}
	if err := c.Reload(); err != nil {
		return nil, nil, err
	}
	base := &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: c.get}
	base.GetConfigForClient = serverALPN(base)
	return base, c, nil
}

// Certificate is the master's serving certificate and key, swapped
// atomically by Reload. Safe for concurrent use.
type Certificate struct {
	certFile, keyFile string
	cur               atomic.Pointer[tls.Certificate]
}

// Reload reads the certificate and key files again. A pair that does not
// load is an error and the certificate in force stays.
func (c *Certificate) Reload() error {
	cert, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
	if err != nil {
		return fmt.Errorf("load --tls-cert %s and --tls-key %s: %w", c.certFile, c.keyFile, err)
	}
	c.cur.Store(&cert)
	return nil
}

func (c *Certificate) get(*tls.ClientHelloInfo) (*tls.Certificate, error) { return c.cur.Load(), nil }

// serverALPN returns the GetConfigForClient of base: a copy offering "h2"
// to a client that offers it without "http/1.1", one offering "http/1.1"
// to any other.
func serverALPN(base *tls.Config) func(*tls.ClientHelloInfo) (*tls.Config, error) {
	grpcCfg, httpCfg := base.Clone(), base.Clone()
	grpcCfg.NextProtos = []string{"h2"}
	httpCfg.NextProtos = []string{"http/1.1"}
	return func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
		if slices.Contains(hello.SupportedProtos, "h2") && !slices.Contains(hello.SupportedProtos, "http/1.1") {
			return grpcCfg, nil
		}
		return httpCfg, nil
	}
}
