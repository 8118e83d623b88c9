package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"slices"

	"github.com/spf13/pflag"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// TLS on the master's one port. The master serves gRPC (agents,
// frameworks) and its HTTP API (operators) on one listener and routes each
// connection by its first bytes (splitListener). Under TLS those bytes are
// only readable after the handshake, and its ALPN choice must already suit
// the protocol that follows: gRPC needs "h2", and an HTTP client offered
// "h2" would speak HTTP/2 too and be routed to the gRPC server. So the
// master picks per client hello: a client that offers "h2" and not
// "http/1.1" (grpc-go offers only "h2") gets "h2"; any other (curl, Go's
// net/http, browsers) gets "http/1.1".

// serverTLS loads the master's certificate and key (PEM) into a server
// config with that ALPN choice. Both files or neither.
func serverTLS(certFile, keyFile string) (*tls.Config, error) {
	switch {
	case certFile == "" && keyFile == "":
		return nil, nil
	case certFile == "" || keyFile == "":
		return nil, exitError{code: 2, msg: "--tls-cert and --tls-key go together"}
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("load --tls-cert %s and --tls-key %s: %w", certFile, keyFile, err)
	}
	base := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	base.GetConfigForClient = serverALPN(base)
	return base, nil
}

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

// masterTLS is the client side: --master-ca names the PEM certificate(s)
// that sign the master's certificate; given, every connection to the
// master uses TLS and verifies it (host name or IP of --master included).
type masterTLS struct {
	caFile string
}

func (m *masterTLS) register(f *pflag.FlagSet) {
	f.StringVar(&m.caFile, "master-ca", "", "PEM file of the CA that signed the master's --tls-cert: connect to the master over TLS and verify it (default: no TLS)")
}

// config returns the client TLS config, nil without --master-ca.
func (m *masterTLS) config() (*tls.Config, error) {
	if m.caFile == "" {
		return nil, nil
	}
	data, err := os.ReadFile(m.caFile)
	if err != nil {
		return nil, exitError{code: 2, msg: fmt.Sprintf("--master-ca: %v", err)}
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, exitError{code: 2, msg: fmt.Sprintf("--master-ca %s: no PEM certificate in it", m.caFile)}
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// dialOptions returns the gRPC dial options for the master: TLS
// credentials with --master-ca, none otherwise (plain connection).
func (m *masterTLS) dialOptions() ([]grpc.DialOption, error) {
	cfg, err := m.config()
	if err != nil || cfg == nil {
		return nil, err
	}
	return []grpc.DialOption{grpc.WithTransportCredentials(credentials.NewTLS(cfg))}, nil
}
