package main

import (
	"crypto/tls"

	"github.com/brimnode/brim/cli"
	"github.com/brimnode/brim/master/transport"
)

// serverTLS is the master's TLS config from --tls-cert and --tls-key
// (both or neither; nil for neither).
func serverTLS(certFile, keyFile string) (*tls.Config, *transport.Certificate, error) {
	switch {
	case certFile == "" && keyFile == "":
		return nil, nil, nil
	case certFile == "" || keyFile == "":
		return nil, nil, cli.ExitError{Code: 2, Msg: "--tls-cert and --tls-key go together"}
	}
	return transport.LoadTLS(certFile, keyFile)
}
