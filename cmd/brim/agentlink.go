package main

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/pflag"
	"google.golang.org/grpc"

	"github.com/brimnode/brim/agent/agentd"
	"github.com/brimnode/brim/cli"
)

// linkOptions are the agent's credentials towards the master, shared by
// `brim dev` and `brim agent --master`: flags here, resolved into
// agentd.LinkConfig by resolve.
type linkOptions struct {
	// principal and secretFile authenticate the agent (register);
	// secret is resolved from them by credentials.
	principal, secretFile, secret string
	// tls is --master-ca; dial is resolved from it by credentials.
	tls  cli.MasterTLS
	dial []grpc.DialOption
}

// register adds the agent's authentication flags to f.
func (lo *linkOptions) register(f *pflag.FlagSet) {
	f.StringVar(&lo.principal, "principal", "", "principal to authenticate the agent as (needed when the master has --authenticate-agents)")
	f.StringVar(&lo.secretFile, "secret-file", "", "file holding the principal's secret (default: $BRIM_SECRET)")
	lo.tls.Register(f)
}

// credentials resolves the agent's secret (--secret-file, else
// $BRIM_SECRET) and its TLS dial options (--master-ca); a usage error
// exits 2.
func (lo *linkOptions) credentials() error {
	dial, err := lo.tls.DialOptions()
	if err != nil {
		return err
	}
	lo.dial = dial
	if lo.principal != "" && lo.secretFile == "" && os.Getenv("BRIM_SECRET") == "" {
		return cli.ExitError{Code: 2, Msg: fmt.Sprintf("--principal %s needs a secret: --secret-file or $BRIM_SECRET", lo.principal)}
	}
	secret, err := cli.FrameworkSecret(lo.principal, "", lo.secretFile)
	if err != nil {
		return cli.ExitError{Code: 2, Msg: err.Error()}
	}
	lo.secret = secret
	return nil
}

// resolve runs credentials and puts them in l.
func (lo *linkOptions) resolve(l *agentd.LinkConfig) error {
	if err := lo.credentials(); err != nil {
		return err
	}
	master, discover, err := cli.ResolveMasters(context.Background(), l.Master)
	if err != nil {
		return err
	}
	l.Master, l.Discover = master, discover
	l.Principal, l.Secret, l.DialOptions = lo.principal, lo.secret, lo.dial
	return nil
}
