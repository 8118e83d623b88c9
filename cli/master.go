package cli

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/brimnode/brim/client"
	"github.com/brimnode/brim/master/discovery"
)

// DefaultMaster is the master's address when --master is not given, and
// the master's default --listen.
const DefaultMaster = "127.0.0.1:5050"

// MasterTLS is the client side: --master-ca names the PEM certificate(s)
// that sign the master's certificate; given, every connection to the
// master uses TLS and verifies it (host name or IP of --master included).
type MasterTLS struct {
	CAFile string
}

// Register adds --master-ca to f.
func (m *MasterTLS) Register(f *pflag.FlagSet) {
	f.StringVar(&m.CAFile, "master-ca", "", "PEM file of the CA that signed the master's --tls-cert: connect to the master over TLS and verify it (default: no TLS)")
}

// Config returns the client TLS config, nil without --master-ca.
func (m *MasterTLS) Config() (*tls.Config, error) {
	if m.CAFile == "" {
		return nil, nil
	}
	cfg, err := client.LoadCA(m.CAFile)
	if errors.Is(err, client.ErrNoCertificate) {
		return nil, ExitError{Code: 2, Msg: fmt.Sprintf("--master-ca %s: no PEM certificate in it", m.CAFile)}
	}
	if err != nil {
		return nil, ExitError{Code: 2, Msg: fmt.Sprintf("--master-ca: %v", err)}
	}
	return cfg, nil
}

// DialOptions returns the gRPC dial options for the master: TLS
// credentials with --master-ca, none otherwise (plain connection).
func (m *MasterTLS) DialOptions() ([]grpc.DialOption, error) {
	cfg, err := m.Config()
	if err != nil || cfg == nil {
		return nil, err
	}
	return []grpc.DialOption{grpc.WithTransportCredentials(credentials.NewTLS(cfg))}, nil
}

// FrameworkSecret is the secret of principal: --secret-file (trimmed),
// else --secret, else $BRIM_SECRET. --secret or --secret-file without a
// principal is a usage error, as is a principal without any secret;
// $BRIM_SECRET alone is ignored.
func FrameworkSecret(principal, secret, secretFile string) (string, error) {
	if principal == "" {
		if secret != "" || secretFile != "" {
			return "", errors.New("--secret and --secret-file need --principal")
		}
		return "", nil
	}
	if secretFile != "" {
		b, err := os.ReadFile(secretFile)
		if err != nil {
			return "", fmt.Errorf("--secret-file: %w", err)
		}
		secret = strings.TrimSpace(string(b))
	} else if secret == "" {
		secret = os.Getenv("BRIM_SECRET")
	}
	if secret == "" {
		return "", fmt.Errorf("--principal %s needs a secret: --secret-file, --secret or $BRIM_SECRET", principal)
	}
	return secret, nil
}

// ResolveMasters turns a --master value of the form
// etcd://HOST:2379[,…]/PREFIX into the list of the masters campaigning
// there, the leader first (discovery.Discover), and returns the
// discovery itself for clients that live long enough to need it again
// (agents, frameworks: masterlink and scheduler Options.Discover). Any
// other value is returned as it is, with a nil discovery. TLS and
// authentication to etcd come from the environment: BRIM_ETCD_CA,
// BRIM_ETCD_CERT, BRIM_ETCD_KEY, BRIM_ETCD_USER, BRIM_ETCD_PASSWORD_FILE.
func ResolveMasters(ctx context.Context, master string) (string, func(context.Context) ([]string, error), error) {
	if !strings.HasPrefix(master, "etcd://") {
		return master, nil, nil
	}
	endpoints, prefix, err := discovery.ParseURL(master)
	if err != nil {
		return "", nil, ExitError{Code: 2, Msg: "--master " + err.Error()}
	}
	tlsCfg, err := discovery.LoadTLS(os.Getenv("BRIM_ETCD_CA"), os.Getenv("BRIM_ETCD_CERT"), os.Getenv("BRIM_ETCD_KEY"))
	if err != nil {
		return "", nil, ExitError{Code: 2, Msg: "BRIM_ETCD_…: " + err.Error()}
	}
	cfg := discovery.Config{Endpoints: endpoints, Prefix: prefix, TLS: tlsCfg}
	if user, file := os.Getenv("BRIM_ETCD_USER"), os.Getenv("BRIM_ETCD_PASSWORD_FILE"); user != "" || file != "" {
		if user == "" || file == "" {
			return "", nil, ExitError{Code: 2, Msg: "BRIM_ETCD_USER and BRIM_ETCD_PASSWORD_FILE go together"}
		}
		if cfg.Password, err = discovery.ReadPassword(file); err != nil {
			return "", nil, ExitError{Code: 2, Msg: err.Error()}
		}
		cfg.Username = user
	}
	discover := func(ctx context.Context) ([]string, error) { return discovery.Discover(ctx, cfg) }
	addrs, err := discover(ctx)
	if err != nil {
		return "", nil, ExitError{Code: 1, Msg: fmt.Sprintf("--master %s: %v", master, err)}
	}
	return strings.Join(addrs, ","), discover, nil
}
