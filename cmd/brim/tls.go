package main

import (
	"crypto/tls"
	"errors"
	"fmt"

	"github.com/brimnode/brim/client"
	"github.com/brimnode/brim/master"
	"github.com/spf13/pflag"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// serverTLS is the master's TLS config from --tls-cert and --tls-key
// (both or neither; nil for neither).
func serverTLS(certFile, keyFile string) (*tls.Config, *master.Certificate, error) {
	switch {
	case certFile == "" && keyFile == "":
		return nil, nil, nil
	case certFile == "" || keyFile == "":
		return nil, nil, exitError{code: 2, msg: "--tls-cert and --tls-key go together"}
	}
	return master.LoadTLS(certFile, keyFile)
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
	cfg, err := client.LoadCA(m.caFile)
	if errors.Is(err, client.ErrNoCertificate) {
		return nil, exitError{code: 2, msg: fmt.Sprintf("--master-ca %s: no PEM certificate in it", m.caFile)}
	}
	if err != nil {
		return nil, exitError{code: 2, msg: fmt.Sprintf("--master-ca: %v", err)}
	}
	return cfg, nil
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
