package agentd

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/brimnode/brim/agent"
	"github.com/brimnode/brim/containerizer"
	"github.com/brimnode/brim/internal/cgtree"
	"github.com/brimnode/brim/internal/lockfile"
	"github.com/brimnode/brim/isolator/cgroups"
	"github.com/brimnode/brim/isolator/network"
)

// Cleanup tears down what an agent on cfg left on the host when it will
// not come back (`brim agent cleanup`; the package's removal runs it):
// with the state dir's lock taken, so that no agent can start meanwhile,
// it kills the containers through their cgroups (freeze, SIGKILL every
// process under the cgroup parent, wait) and removes their groups and the
// parent in every hierarchy, then the shims left, whatever is mounted
// below the state dir, the containers' directories and libcontainer
// state, then the network (the nftables
// table, veths, netns mounts, address records, IFBs with their classes,
// the bridge, and the host's IPv4 forwarding as it was) when cfg has
// --network or the state dir has network state, then the checkpoint and
// a stale socket. It
// reports each thing it did to report, one line each ("killed …",
// "removed …", "restored …"), and returns how many there were: 0 on a
// host with nothing left (a second run). The agent's ID and the master
// link's state stay.
//
// It makes nothing it does not remove (no state dir, no cgroup parent,
// no bridge), and carries on past errors, returning them joined. Errors
// are *ConfigError for a bad setting, and wrap agent.ErrAgentRunning,
// naming the PID when the kernel lists it, when an agent holds the state
// dir (or cgroups.ErrParentInUse the cgroup parent): then it did nothing.
func Cleanup(ctx context.Context, cfg Config, report func(string)) (int, error) {
	res, err := cfg.resolveWhere()
	if err != nil {
		return 0, err
	}
	n := 0
	say := func(lines ...string) {
		for _, l := range lines {
			n++
			report(l)
		}
	}
	if _, err := os.Stat(cfg.StateDir); err == nil {
		lock, err := agent.LockStateDir(cfg.StateDir)
		if err != nil {
			return 0, refusal(cfg.StateDir, err)
		}
		defer lock.Close()
	}
	cg, err := cgroups.New(cgroups.Config{Parent: res.cgParent})
	if err != nil {
		return 0, fmt.Errorf("cgroup isolator: %w", err)
	}
	if len(cgtree.Roots(res.cgParent)) > 0 {
		lock, err := cg.LockParent()
		if err != nil {
			return 0, refusal(cfg.StateDir, err)
		}
		defer lock.Close()
	}
	var errs []error
	cgRep, err := cg.Teardown(ctx)
	if len(cgRep.Killed) > 0 {
		say(fmt.Sprintf("killed %d processes under cgroup %s (pids %s)", len(cgRep.Killed), res.cgParent, joinInts(cgRep.Killed)))
	}
	for _, g := range cgRep.Removed {
		say("removed cgroup " + g + " (every hierarchy)")
	}
	if errors.Is(err, cgroups.ErrInvalid) {
		// A parent that is not brim's: nothing may be touched.
		return n, err
	}
	errs = append(errs, err)

	lines, err := containerizer.Teardown(ctx, cfg.StateDir)
	say(lines...)
	errs = append(errs, err)

	netState := res.network.StateDir
	if _, serr := os.Stat(netState); cfg.Network.Enabled || serr == nil {
		lines, err := network.Teardown(res.network)
		say(lines...)
		errs = append(errs, err)
		if err == nil {
			errs = append(errs, removeNetworkState(netState, say))
		}
	}

	lines, err = agent.RemoveCheckpoints(cfg.StateDir)
	say(lines...)
	errs = append(errs, err)

	if removeStaleSocket(cfg.Socket) {
		say("removed socket " + cfg.Socket + " (no agent listens)")
	}
	return n, errors.Join(errs...)
}

// refusal is the error of a cleanup that found an agent running.
func refusal(stateDir string, err error) error {
	holder := ""
	if pid := lockfile.Holder(filepath.Join(stateDir, "lock")); pid > 0 {
		holder = fmt.Sprintf(" (pid %d)", pid)
	}
	if errors.Is(err, agent.ErrAgentRunning) {
		return fmt.Errorf("an agent%s holds state dir %s: stop it first (systemctl stop brim-agent), then clean up: %w", holder, stateDir, agent.ErrAgentRunning)
	}
	if errors.Is(err, cgroups.ErrParentInUse) {
		return fmt.Errorf("another agent holds the cgroup parent: stop it first: %w", err)
	}
	return err
}

// removeNetworkState removes the network isolator's state dir once its
// teardown left nothing in it but the lock file.
func removeNetworkState(dir string, say func(...string)) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("remove network state: %w", err)
	}
	if slices.ContainsFunc(ents, func(e fs.DirEntry) bool { return e.Name() != ".lock" }) {
		return nil // something the teardown did not take: keep it
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove network state: %w", err)
	}
	say("removed directory " + dir)
	return nil
}

// removeStaleSocket removes the socket file of a dead agent: one nothing
// answers on.
func removeStaleSocket(path string) bool {
	fi, err := os.Lstat(path)
	if err != nil || fi.Mode()&fs.ModeSocket == 0 {
		return false
	}
	if c, err := net.Dial("unix", path); err == nil {
		c.Close()
		return false
	}
	return os.Remove(path) == nil
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, " ")
}
