package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/brimnode/brim/agent/agentd"
	"github.com/brimnode/brim/cli"
	"github.com/brimnode/brim/internal/flagfile"
)

// Default configuration files, read when present and no --config is given.
const (
	defaultAgentConfig  = "/etc/brim/agent.toml"
	defaultMasterConfig = "/etc/brim/master.toml"
)

// notKeys are flags that are not configuration keys.
var notKeys = []string{"config", "help", "commented"}

// configFile is --config: a TOML file whose keys are the command's flags
// (docs/operators.md); flags on the command line win over it.
type configFile struct {
	path string // --config
	def  string // read when present and --config is not given; "" none
}

func (c *configFile) register(f *pflag.FlagSet, def string) {
	c.def = def
	usage := "TOML file whose keys are these flags; flags given on the command line win"
	if def != "" {
		usage += " (default " + def + " when present)"
	}
	f.StringVar(&c.path, "config", "", usage)
}

// load applies the configuration file to f and returns its path, or ""
// when there is none. A file that does not load exits 2 naming the key.
func (c *configFile) load(f *pflag.FlagSet) (string, error) {
	p := c.path
	if p == "" {
		if c.def == "" {
			return "", nil
		}
		if _, err := os.Stat(c.def); err != nil {
			return "", nil
		}
		p = c.def
	}
	if !filepath.IsAbs(p) {
		return "", cli.ExitError{Code: 2, Msg: fmt.Sprintf("--config %q: must be an absolute path (it is read again on SIGHUP)", p)}
	}
	if err := flagfile.Apply(f, p, notKeys...); err != nil {
		return "", cli.ExitError{Code: 2, Msg: err.Error()}
	}
	return p, nil
}

// newConfigCommand is `brim agent config` / `brim master config`: it takes
// the daemon's flags and --config, checks them as the daemon would
// (check), and prints the effective configuration as TOML. --commented
// prints every key commented out: the package's default file.
//
// register adds the daemon's flags, --config included, and returns the
// check and the --config flag's value.
func newConfigCommand(daemon string, register func(f *pflag.FlagSet) (check func() error, cf *configFile)) *cobra.Command {
	var commented bool
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Print the effective configuration of brim " + daemon + " (file, then flags) as TOML",
		Args:  cli.UsageArgs(cobra.NoArgs),
	}
	check, cf := register(cmd.Flags())
	cmd.Flags().BoolVar(&commented, "commented", false, "print every key commented out (a default configuration file)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if _, err := cf.load(cmd.Flags()); err != nil {
			return err
		}
		if err := check(); err != nil {
			return err
		}
		return writeConfig(cmd.OutOrStdout(), cmd.Flags(), daemon, commented)
	}
	cli.MarkUsageErrors(cmd)
	return cmd
}

func writeConfig(w io.Writer, f *pflag.FlagSet, daemon string, commented bool) error {
	var b strings.Builder
	if err := flagfile.Write(&b, f, notKeys...); err != nil {
		return err
	}
	text := b.String()
	if commented {
		var out strings.Builder
		fmt.Fprintf(&out, "# brim %s configuration: every key is a flag of `brim %s` (see\n# `brim %s --help` and /usr/share/doc/brim/operators.md). Uncomment to set;\n# a flag given on the command line wins over this file.\n", daemon, daemon, daemon)
		for _, line := range strings.SplitAfter(text, "\n") {
			if line != "" && !strings.HasPrefix(line, "#") {
				line = "#" + line
			}
			out.WriteString(line)
		}
		text = out.String()
	}
	_, err := io.WriteString(w, text)
	return err
}

// reloadable are the flags of an agent that a reload applies (SIGHUP);
// a change of any other flag in the file needs a restart.
var reloadable = map[string]bool{"log-level": true, "estimator": true, "estimator-opt": true,
	"qos": true, "qos-opt": true, "principal": true, "secret-file": true}

// reloadFrom reads the configuration file at path again (SIGHUP) into a
// fresh flag set of the command newCmd builds, the command line (cmdline)
// still winning, and returns what an agent may reload: the log level, the
// estimator and QoS controller with their options, the principal's
// secret (its file is read again), and the names of changed flags that
// need a restart.
func reloadFrom(newCmd func() *cobra.Command, cmdline *pflag.FlagSet, path string) func() (agentd.Reloadable, error) {
	return func() (agentd.Reloadable, error) {
		c := newCmd()
		f := c.Flags()
		f.AddFlagSet(c.PersistentFlags())
		if err := flagfile.CopyChanged(f, cmdline); err != nil {
			return agentd.Reloadable{}, err
		}
		if err := flagfile.Apply(f, path, notKeys...); err != nil {
			return agentd.Reloadable{}, err
		}
		for _, name := range []string{"log-level", "estimator", "estimator-opt", "qos", "qos-opt", "principal", "secret-file"} {
			if f.Lookup(name) == nil {
				return agentd.Reloadable{}, fmt.Errorf("reload: the command has no --%s", name)
			}
		}
		str := func(name string) string { return f.Lookup(name).Value.String() }
		arr := func(name string) []string { v, _ := f.GetStringArray(name); return v }
		r := agentd.Reloadable{
			LogLevel: str("log-level"),
			Plugins: &agentd.PluginConfig{Estimator: str("estimator"), EstimatorOpts: arr("estimator-opt"),
				QoS: str("qos"), QoSOpts: arr("qos-opt")},
			Principal: str("principal"),
		}
		if r.Principal != "" {
			secret, err := cli.FrameworkSecret(r.Principal, "", str("secret-file"))
			if err != nil {
				return agentd.Reloadable{}, err
			}
			r.Secret = secret
		}
		f.VisitAll(func(fl *pflag.Flag) {
			if reloadable[fl.Name] || slices.Contains(notKeys, fl.Name) {
				return
			}
			if cur := cmdline.Lookup(fl.Name); cur != nil && cur.Value.String() != fl.Value.String() {
				r.Restart = append(r.Restart, "--"+fl.Name)
			}
		})
		return r, nil
	}
}
