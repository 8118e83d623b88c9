package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/brimnode/brim/cli"
	"github.com/brimnode/brim/master/discovery"
	"github.com/brimnode/brim/master/etcdstore"
	"github.com/brimnode/brim/master/server"
)

// haFlags choose the master's store: bbolt in a directory (the default)
// or etcd, which makes the master one of a highly available cluster
// (docs/ha.md). brim master only.
type haFlags struct {
	store                     string
	advertise                 string
	etcdCA, etcdCert, etcdKey string
	etcdUser, etcdPassword    string
	sessionTTL                time.Duration
	endDeadLeader             bool
}

func (h *haFlags) register(f *pflag.FlagSet) {
	f.StringVar(&h.store, "store", "", "where the registry lives: bbolt:DIR (same as --state-dir DIR; the default is bbolt:--state-dir) or etcd://HOST:2379[,HOST:2379…]/PREFIX (highly available: leader election, docs/ha.md)")
	f.StringVar(&h.advertise, "advertise", "", "with an etcd store: the HOST:PORT agents, frameworks and operators reach this master at, named by standbys (default: --listen, which must then name a host)")
	f.StringVar(&h.etcdCA, "etcd-ca", "", "PEM CA that signed etcd's certificate: talk to etcd over TLS")
	f.StringVar(&h.etcdCert, "etcd-cert", "", "PEM client certificate for etcd (with --etcd-key)")
	f.StringVar(&h.etcdKey, "etcd-key", "", "PEM private key of --etcd-cert")
	f.StringVar(&h.etcdUser, "etcd-user", "", "etcd user (with --etcd-password-file), when etcd has authentication on")
	f.StringVar(&h.etcdPassword, "etcd-password-file", "", "file holding the etcd user's password")
	f.DurationVar(&h.sessionTTL, "session-ttl", etcdstore.DefaultSessionTTL, "with an etcd store: the leader's session lease (whole seconds); a dead or cut-off leader is replaced after about this long")
	f.BoolVar(&h.endDeadLeader, "end-dead-leader", true, "with an etcd store: a standby that finds the leader's port refusing connections (its process gone), as a client reported, ends the leader's session at once instead of waiting out --session-ttl (docs/ha.md)")
}

// check validates the flags without connecting to anything.
func (h *haFlags) check() error {
	switch {
	case h.store == "", strings.HasPrefix(h.store, "bbolt:") && len(h.store) > len("bbolt:"):
		if h.advertise != "" {
			return cli.ExitError{Code: 2, Msg: "--advertise needs --store etcd://…"}
		}
		return nil
	case strings.HasPrefix(h.store, "etcd://"):
		if _, _, err := discovery.ParseURL(h.store); err != nil {
			return cli.ExitError{Code: 2, Msg: err.Error()}
		}
		if h.sessionTTL < time.Second || h.sessionTTL%time.Second != 0 {
			return cli.ExitError{Code: 2, Msg: fmt.Sprintf("--session-ttl %v: want whole seconds, at least 1s", h.sessionTTL)}
		}
		return nil
	}
	return cli.ExitError{Code: 2, Msg: fmt.Sprintf("--store %q: want bbolt:DIR or etcd://HOST:2379[,HOST:2379…]/PREFIX", h.store)}
}

// apply sets cfg's store from the flags: a state dir for bbolt, an
// Elector on etcd. The returned function closes what it opened.
func (h *haFlags) apply(ctx context.Context, cfg *server.Config, log *slog.Logger) (func() error, error) {
	nothing := func() error { return nil }
	if err := h.check(); err != nil {
		return nil, err
	}
	if h.store == "" {
		return nothing, nil
	}
	if dir, ok := strings.CutPrefix(h.store, "bbolt:"); ok {
		cfg.StateDir = dir
		return nothing, nil
	}
	endpoints, prefix, err := discovery.ParseURL(h.store)
	if err != nil {
		return nil, cli.ExitError{Code: 2, Msg: err.Error()}
	}
	if cfg.Fresh {
		return nil, cli.ExitError{Code: 2, Msg: "--fresh is for a bbolt store; an etcd store is managed with etcdctl"}
	}
	tlsCfg, err := discovery.LoadTLS(h.etcdCA, h.etcdCert, h.etcdKey)
	if err != nil {
		return nil, cli.ExitError{Code: 2, Msg: err.Error()}
	}
	ec := etcdstore.Config{Endpoints: endpoints, Prefix: prefix, TLS: tlsCfg, SessionTTL: h.sessionTTL, Log: log}
	if (h.etcdUser == "") != (h.etcdPassword == "") {
		return nil, cli.ExitError{Code: 2, Msg: "--etcd-user and --etcd-password-file go together"}
	}
	if h.etcdUser != "" {
		if ec.Password, err = discovery.ReadPassword(h.etcdPassword); err != nil {
			return nil, cli.ExitError{Code: 2, Msg: err.Error()}
		}
		ec.Username = h.etcdUser
	}
	c, err := etcdstore.Open(ctx, ec)
	if err != nil {
		return nil, err
	}
	cfg.StateDir, cfg.BackupInterval = "", 0 // the registry is etcd's; back it up with etcdctl snapshot
	cfg.Elector, cfg.Advertise = c, h.advertise
	cfg.WaitOutDeadLeader = !h.endDeadLeader
	return c.Close, nil
}
