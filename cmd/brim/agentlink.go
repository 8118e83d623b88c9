package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/brimnode/brim/agent/agentd"
	"github.com/spf13/pflag"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// linkOptions are the agent's credentials towards the master, shared by
// `brim dev` and `brim agent --master`: flags here, resolved into
// agentd.LinkConfig by resolve.
type linkOptions struct {
	// principal and secretFile authenticate the agent (register);
	// secret is resolved from them by credentials.
	principal, secretFile, secret string
	// tls is --master-ca; dial is resolved from it by credentials.
	tls  masterTLS
	dial []grpc.DialOption
}

// register adds the agent's authentication flags to f.
func (lo *linkOptions) register(f *pflag.FlagSet) {
	f.StringVar(&lo.principal, "principal", "", "principal to authenticate the agent as (needed when the master has --authenticate-agents)")
	f.StringVar(&lo.secretFile, "secret-file", "", "file holding the principal's secret (default: $BRIM_SECRET)")
	lo.tls.register(f)
}

// credentials resolves the agent's secret (--secret-file, else
// $BRIM_SECRET) and its TLS dial options (--master-ca); a usage error
// exits 2.
func (lo *linkOptions) credentials() error {
	dial, err := lo.tls.dialOptions()
	if err != nil {
		return err
	}
	lo.dial = dial
	if lo.principal != "" && lo.secretFile == "" && os.Getenv("BRIM_SECRET") == "" {
		return exitError{code: 2, msg: fmt.Sprintf("--principal %s needs a secret: --secret-file or $BRIM_SECRET", lo.principal)}
	}
	secret, err := frameworkSecret(lo.principal, "", lo.secretFile)
	if err != nil {
		return exitError{code: 2, msg: err.Error()}
	}
	lo.secret = secret
	return nil
}

// resolve runs credentials and puts them in l.
func (lo *linkOptions) resolve(l *agentd.LinkConfig) error {
	if err := lo.credentials(); err != nil {
		return err
	}
	master, err := resolveMasters(context.Background(), l.Master)
	if err != nil {
		return err
	}
	l.Master = master
	l.Principal, l.Secret, l.DialOptions = lo.principal, lo.secret, lo.dial
	return nil
}

// masterRefusal turns the master's refusal of who ("agent",
// "framework": codes.Unauthenticated or PermissionDenied anywhere in err's
// chain) into a one-line message and exit code 1; other errors are
// returned as they are.
func masterRefusal(who string, err error) error {
	var gs interface{ GRPCStatus() *status.Status }
	if !errors.As(err, &gs) {
		return err
	}
	var what string
	switch st := gs.GRPCStatus(); st.Code() {
	case codes.Unauthenticated:
		what = "unauthenticated"
	case codes.PermissionDenied:
		what = "permission denied"
	default:
		return err
	}
	return exitError{code: 1, msg: "the master refused the " + who + ": " + what + ": " + gs.GRPCStatus().Message()}
}
