package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/brimnode/brim/cli"
	"github.com/brimnode/brim/master"
	"github.com/brimnode/brim/master/boltstore"
	"github.com/brimnode/brim/master/server"
)

const (
	defaultMasterStateDir = "/var/lib/brim/master"
)

var _ = registerSubcommand(newMasterCommand)

// masterFlags are the master's flags, shared by `brim master` and `brim dev`.
type masterFlags struct {
	listen, stateDir    string
	credentials, acls   string
	authenticateAgents  bool
	allocationInterval  time.Duration
	heartbeatInterval   time.Duration
	maxMissedHeartbeats int
	offerTimeout        time.Duration
	failoverTimeout     time.Duration
	reregisterTimeout   time.Duration
	refuse              time.Duration
	sorter              string
	fresh               bool
	backupInterval      time.Duration
	backupKeep          int
	maxCompletedTasks   int
	maxCompletedFWs     int
	demands             demandFlags
	// tlsCert and tlsKey serve the port over TLS (brim master only).
	tlsCert, tlsKey string
	// ha chooses the store: bbolt or etcd (brim master only).
	ha haFlags
}

// register adds the flags to fl; --state-dir only with a default.
func (f *masterFlags) register(fl *pflag.FlagSet, stateDirDefault string) {
	fl.StringVar(&f.listen, "listen", cli.DefaultMaster, "address of the gRPC (agents, frameworks) and HTTP (operators) API, one port")
	if stateDirDefault != "" {
		fl.StringVar(&f.stateDir, "state-dir", stateDirDefault, "state directory (the master's bbolt store lives in STATE-DIR/master.db)")
	}
	fl.StringVar(&f.credentials, "credentials", "", "operator credentials file (JSON: [{\"principal\":…, \"secret\":…}]); empty: the HTTP API needs no authentication")
	fl.BoolVar(&f.authenticateAgents, "authenticate-agents", false, "agents must register with a principal and secret of --credentials (brim agent --principal P --secret-file F)")
	fl.StringVar(&f.acls, "acls", "", "ACL file (JSON, see docs/master.md); empty: every authenticated principal may do everything")
	fl.DurationVar(&f.allocationInterval, "allocation-interval", master.DefaultAllocationInterval, "period of the allocation cycle")
	fl.DurationVar(&f.heartbeatInterval, "heartbeat-interval", master.DefaultHeartbeatInterval, "agents' heartbeat period")
	fl.IntVar(&f.maxMissedHeartbeats, "max-missed-heartbeats", master.DefaultMaxMissedHeartbeats, "missed heartbeats after which an agent is unreachable and its tasks LOST")
	fl.DurationVar(&f.offerTimeout, "offer-timeout", 0, "rescind offers not used within this time (0: never)")
	fl.DurationVar(&f.failoverTimeout, "failover-timeout", master.DefaultFailoverTimeout, "how long a disconnected framework keeps its tasks unless it asks for another timeout")
	fl.DurationVar(&f.reregisterTimeout, "reregistration-timeout", 0, "after a start or a failover, how long to wait for the registry's agents before reconciliation calls tasks it does not know LOST (0: heartbeat-interval × max-missed-heartbeats, at least 10s: twice the agents' longest reconnect backoff)")
	fl.DurationVar(&f.refuse, "default-refuse", 5*time.Second, "how long declined resources are not offered again to the framework by default")
	fl.StringVar(&f.sorter, "sorter", "drf", "allocation order: drf, medrf or random")
	fl.BoolVar(&f.fresh, "fresh", false, "start with an empty store when STATE-DIR/master.db is empty or damaged (it is kept as master.db.broken-TIME); without it the master refuses to start")
	fl.DurationVar(&f.backupInterval, "backup-interval", boltstore.DefaultBackupInterval, "back the store up into STATE-DIR/backups at start and at this period (0: never); restore with `brim master restore`")
	fl.IntVar(&f.maxCompletedTasks, "max-completed-tasks", master.DefaultMaxCompletedTasks, "ended tasks kept in /state's completedTasks (positive)")
	fl.IntVar(&f.maxCompletedFWs, "max-completed-frameworks", master.DefaultMaxCompletedFrameworks, "removed frameworks kept in /state's completedFrameworks (positive)")
	fl.IntVar(&f.backupKeep, "backup-keep", boltstore.DefaultBackupKeep, "number of backups kept in STATE-DIR/backups")
	f.demands.register(fl)
}

// demandFlags are the time-aware demands' flags (docs/demands.md).
type demandFlags struct {
	lead, looseLead, pickUp, reclaimAhead time.Duration
	preempt, lend                         bool
	spread                                int
}

func (f *demandFlags) register(fl *pflag.FlagSet) {
	fl.DurationVar(&f.lead, "demand-lead", master.DefaultDemandLead, "a demand's capacity is held from DRF this long before its planned start")
	fl.DurationVar(&f.looseLead, "demand-loose-lead", 0, "--demand-lead for loose starts (0: --demand-lead)")
	fl.DurationVar(&f.pickUp, "demand-pickup", master.DefaultDemandPickUp, "a demand handed over fails when its framework launches nothing on it within this long")
	fl.BoolVar(&f.preempt, "demand-preempt", true, "reclaim a strict start's booked capacity from DRF tasks (roles above their quota guarantee, youngest first) and revocable work; false: the start fails instead")
	fl.BoolVar(&f.lend, "demand-lend", true, "lend capacity held ahead of a start to frameworks that take revocable resources, until --demand-reclaim-ahead before it")
	fl.DurationVar(&f.reclaimAhead, "demand-reclaim-ahead", master.DefaultDemandReclaimAhead, "lent capacity is taken back and tasks preempted this long before a start: at least the agents' --kill-grace")
	fl.IntVar(&f.spread, "demand-spread", master.DefaultDemandSpread, "a demand takes at most 1/N of an agent where the plan has room that way (0: best fit, whole agents)")
}

// options checks the flags and returns the master's DemandOptions.
func (f *demandFlags) options() (master.DemandOptions, error) {
	switch {
	case f.lead <= 0 || f.pickUp <= 0 || f.reclaimAhead <= 0:
		return master.DemandOptions{}, cli.ExitError{Code: 2, Msg: "--demand-lead, --demand-pickup and --demand-reclaim-ahead must be positive"}
	case f.looseLead < 0 || f.spread < 0:
		return master.DemandOptions{}, cli.ExitError{Code: 2, Msg: "--demand-loose-lead and --demand-spread must not be negative"}
	}
	return master.DemandOptions{Lead: f.lead, LooseLead: f.looseLead, PickUp: f.pickUp, ReclaimAhead: f.reclaimAhead,
		NoPreempt: !f.preempt, NoLend: !f.lend, Spread: f.spread}, nil
}

// startMaster starts the master the flags describe (server.Start); it
// returns once the listener is open. The returned function waits for
// everything to stop after ctx ends. SIGHUP re-reads --credentials and
// --acls, and never ends the master.
func startMaster(ctx context.Context, f *masterFlags, log *slog.Logger) (*master.Master, net.Addr, func() error, error) {
	if f.maxCompletedTasks < 1 || f.maxCompletedFWs < 1 {
		return nil, nil, nil, cli.ExitError{Code: 2, Msg: "--max-completed-tasks and --max-completed-frameworks must be positive"}
	}
	if f.reregisterTimeout < 0 {
		return nil, nil, nil, cli.ExitError{Code: 2, Msg: "--reregistration-timeout must not be negative"}
	}
	if f.backupInterval < 0 || f.backupKeep < 1 {
		return nil, nil, nil, cli.ExitError{Code: 2, Msg: "--backup-interval must not be negative and --backup-keep must be at least 1"}
	}
	if f.authenticateAgents && f.credentials == "" {
		return nil, nil, nil, cli.ExitError{Code: 2, Msg: "--authenticate-agents needs --credentials (the principals and secrets agents authenticate with)"}
	}
	demands, err := f.demands.options()
	if err != nil {
		return nil, nil, nil, err
	}
	tlsCfg, cert, err := serverTLS(f.tlsCert, f.tlsKey)
	if err != nil {
		return nil, nil, nil, err
	}
	cfg := server.Config{
		Options: master.Options{
			AllocationInterval:     f.allocationInterval,
			HeartbeatInterval:      f.heartbeatInterval,
			MaxMissedHeartbeats:    f.maxMissedHeartbeats,
			OfferTimeout:           f.offerTimeout,
			FailoverTimeout:        f.failoverTimeout,
			ReregistrationTimeout:  f.reregisterTimeout,
			MaxCompletedTasks:      f.maxCompletedTasks,
			MaxCompletedFrameworks: f.maxCompletedFWs,
			Demands:                demands,
			Log:                    log,
		},
		Listen: f.listen, StateDir: f.stateDir, Credentials: f.credentials, ACLs: f.acls, AuthenticateAgents: f.authenticateAgents,
		TLS: tlsCfg, Certificate: cert,
		Fresh: f.fresh, BackupInterval: f.backupInterval, BackupKeep: f.backupKeep,
	}
	cfg.Allocator.DefaultRefuse = f.refuse
	cfg.Allocator.Sorter = f.sorter
	closeStore, err := f.ha.apply(ctx, &cfg, log)
	if err != nil {
		return nil, nil, nil, err
	}
	// SIGHUP is caught from here on, before the master serves.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	cfg.Reload = hup
	r, err := server.Start(ctx, cfg)
	if err != nil {
		signal.Stop(hup)
		_ = closeStore()
		return nil, nil, nil, err
	}
	wait := func() error {
		defer signal.Stop(hup)
		return errors.Join(r.Wait(), closeStore())
	}
	return r.Master, r.Addr, wait, nil
}

// masterCommandFlags are every flag of `brim master`.
type masterCommandFlags struct {
	masterFlags
	lf logFlags
	cf configFile
}

func (m *masterCommandFlags) register(f *pflag.FlagSet) {
	m.masterFlags.register(f, defaultMasterStateDir)
	m.ha.register(f)
	f.StringVar(&m.tlsCert, "tls-cert", "", "PEM certificate (chain) to serve the port over TLS, gRPC and HTTP API alike (with --tls-key; default: no TLS)")
	f.StringVar(&m.tlsKey, "tls-key", "", "PEM private key of --tls-cert")
	m.lf.register(f)
	m.cf.register(f, defaultMasterConfig)
}

// check validates what `brim master` checks before it starts anything.
func (m *masterCommandFlags) check() error {
	if _, err := newLogger(io.Discard, m.lf.level, m.lf.format); err != nil {
		return cli.ExitError{Code: 2, Msg: err.Error()}
	}
	if m.authenticateAgents && m.credentials == "" {
		return cli.ExitError{Code: 2, Msg: "--authenticate-agents needs --credentials (the principals and secrets agents authenticate with)"}
	}
	if (m.tlsCert == "") != (m.tlsKey == "") {
		return cli.ExitError{Code: 2, Msg: "--tls-cert and --tls-key go together"}
	}
	return m.ha.check()
}

func newMasterCommand() *cobra.Command {
	var f masterCommandFlags
	cmd := &cobra.Command{
		Use:   "master",
		Short: "Run the master: agents register, frameworks get DRF offers, operators use the HTTP API",
		Long: `Run the master. Every flag is also a key of the --config file (TOML; flags
win). SIGHUP re-reads --credentials and --acls and never stops the master.`,
		Args: cli.UsageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := f.cf.load(cmd.Flags()); err != nil {
				return err
			}
			log, err := newLogger(cmd.ErrOrStderr(), f.lf.level, f.lf.format)
			if err != nil {
				return cli.ExitError{Code: 2, Msg: err.Error()}
			}
			_, _, wait, err := startMaster(cmd.Context(), &f.masterFlags, log)
			if err != nil {
				return err
			}
			return wait()
		},
	}
	f.register(cmd.Flags())
	cmd.AddCommand(newConfigCommand("master", func(fl *pflag.FlagSet) (func() error, *configFile) {
		c := new(masterCommandFlags)
		c.register(fl)
		return c.check, &c.cf
	}), newMasterRestoreCommand())
	cli.MarkUsageErrors(cmd)
	return cmd
}

// newMasterRestoreCommand is `brim master restore`: a backup replaces the
// store of a stopped master.
func newMasterRestoreCommand() *cobra.Command {
	var from, stateDir string
	cmd := &cobra.Command{
		Use:   "restore --from FILE [--state-dir DIR]",
		Short: "Replace the master's store with a backup (the master must be stopped)",
		Args:  cli.UsageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if from == "" {
				return cli.ExitError{Code: 2, Msg: "--from is required (a backup, e.g. STATE-DIR/backups/master-….db)"}
			}
			if err := boltstore.Restore(from, stateDir); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "restored %s from %s\n", filepath.Join(stateDir, "master.db"), from)
			return nil
		},
	}
	cmd.Flags().StringVar(&from, "from", "", "the backup to restore (a bbolt file written by the master's backups)")
	cmd.Flags().StringVar(&stateDir, "state-dir", defaultMasterStateDir, "the master's state directory")
	cli.MarkUsageErrors(cmd)
	return cmd
}
