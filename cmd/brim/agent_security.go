package main

import (
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/spf13/pflag"

	"github.com/brimnode/brim/agent"
	"github.com/brimnode/brim/containerizer"
	"github.com/brimnode/brim/isolator/cgroups"
	"github.com/brimnode/brim/isolator/network"
)

// securityFlags are `brim agent`'s task-confinement flags (docs/security.md).
type securityFlags struct {
	defaultUser string
	allowRoot   bool
	defaultPids int64
	hide        []string
}

// devSecurity is what `brim dev` runs with: the agent's defaults.
var devSecurity = securityFlags{defaultUser: agent.DefaultUser, defaultPids: cgroups.DefaultPidsMax, hide: containerizer.DefaultHidePaths}

func (s *securityFlags) register(f *pflag.FlagSet) {
	f.StringVar(&s.defaultUser, "default-user", agent.DefaultUser, "user of tasks that name none: NAME, UID, NAME:GROUP or UID:GID from the host's /etc/passwd and /etc/group")
	f.BoolVar(&s.allowRoot, "allow-root-tasks", false, "let tasks run as root (uid 0) when they ask (container run --user root) or as --default-user")
	f.Int64Var(&s.defaultPids, "default-pids", cgroups.DefaultPidsMax, "pids.max of a container that asks for no pids limit (0: unlimited)")
	f.StringSliceVar(&s.hide, "hide-paths", containerizer.DefaultHidePaths, "host paths masked from tasks on the host root (comma-separated; the state dir, the socket's directory and the netns directory always are)")
}

// validate checks the flags the agent would otherwise refuse later, after
// creating things.
func (s *securityFlags) validate() error {
	if s.defaultPids < 0 {
		return fmt.Errorf("--default-pids %d: must not be negative", s.defaultPids)
	}
	if err := agent.CheckUser(s.defaultUser, s.allowRoot); err != nil {
		return fmt.Errorf("--default-user %q: %w", s.defaultUser, err)
	}
	for _, p := range s.hide {
		if !filepath.IsAbs(p) || filepath.Clean(p) == "/" {
			return fmt.Errorf("--hide-paths %q: want absolute paths below /", p)
		}
	}
	return nil
}

// hidePaths is what the containerizer masks besides the state dir: the
// operator's list, the directory of the local API's socket (a task that
// dials it gets ENOENT) and the netns directory.
func (s *securityFlags) hidePaths(socket, netnsDir string) []string {
	if netnsDir == "" {
		netnsDir = network.DefaultNetNSDir
	}
	out := append([]string(nil), s.hide...)
	for _, d := range []string{filepath.Dir(socket), netnsDir} {
		if filepath.IsAbs(d) && filepath.Clean(d) != "/" {
			out = append(out, d)
		}
	}
	return out
}

// raiseFileLimit raises the agent's open-file limit and logs how many
// containers it can follow.
func raiseFileLimit(log *slog.Logger) {
	n, err := agent.RaiseFileLimit()
	if err != nil {
		log.Warn("open-file limit", "err", err)
		return
	}
	log.Info("open-file limit", "nofile", n, "containers_max", n/agent.FDsPerContainer)
}
