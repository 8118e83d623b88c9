package agentd

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/brimnode/brim/agent"
	"github.com/brimnode/brim/containerizer"
	"github.com/brimnode/brim/internal/atomicfile"
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
// state, the image containers' snapshots (their upper dirs; the image
// cache stays for the next agent), then the network (the nftables
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
// no bridge), and carries on past errors, returning them joined. It
// touches nothing when the settings may not be the agent's: a state dir
// without an agent-id, a cgroup parent other than the one the state dir
// records (Run records it), or, for a state dir without that record, a
// parent with a group named after no container of the state dir. Errors
// are *ConfigError for a bad setting or such a mismatch, and wrap
// agent.ErrAgentRunning, naming the PID when the kernel lists it, when an
// agent holds the state dir (or cgroups.ErrParentInUse the cgroup
// parent): then it did nothing.
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
		if !isStateDir(cfg.StateDir) {
			return 0, bad("--state-dir", "%s: no agent-id in it: not an agent's state dir; nothing removed", cfg.StateDir)
		}
		lock, err := agent.LockStateDir(cfg.StateDir)
		if err != nil {
			return 0, refusal(cfg.StateDir, err)
		}
		defer lock.Close()
	}
	own, err := ownedGroups(cfg.StateDir, res.cgParent)
	if err != nil {
		return 0, err
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
	cgRep, err := cg.Teardown(ctx, own)
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

	lines, err := containerizer.Teardown(ctx, cfg.StateDir, runDirOf(cfg))
	say(lines...)
	errs = append(errs, err)

	// The shims are gone, and with them the overlays of the containers'
	// roots: their upper dirs may go.
	lines, err = releaseSnapshots(filepath.Join(cfg.StateDir, "images"))
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

// cgroupParentFile, in the state dir, records the cgroup parent the agent
// used, so that a cleanup given another (a typo: /system.slice) touches
// nothing.
const cgroupParentFile = "cgroup-parent"

// recordCgroupParent writes the agent's cgroup parent into the state dir
// when it is not there yet. A failure (a full disk) is logged, never
// fatal: cleanup then checks the parent's groups against the state dir's
// containers.
func recordCgroupParent(stateDir, parent string, log *slog.Logger) {
	recordSetting(stateDir, cgroupParentFile, parent, "record the cgroup parent in the state dir (brim agent cleanup checks it)", log)
}

// runDirFile, in the state dir, records the agent's --run-dir, so that a
// cleanup run without the flag finds the containers' runtime state.
const runDirFile = "run-dir"

// recordRunDir writes the agent's run dir ("": none) into the state dir
// when it is not there yet, and warns when it is not on a memory file
// system. A failure to record (a full disk) is logged, never fatal.
func recordRunDir(stateDir, runDir string, log *slog.Logger) {
	if runDir != "" && !onMemoryFS(runDir) {
		log.Warn("--run-dir is not on a memory file system (tmpfs): every launch makes and removes its runtime files on disk", "run_dir", runDir)
	}
	if _, ok := recorded(stateDir, runDirFile); !ok && runDir == "" {
		return // none, as before the record
	}
	recordSetting(stateDir, runDirFile, runDir, "record the run dir in the state dir (brim agent cleanup reads it)", log)
}

// recordSetting writes value into the state dir's file name when it
// does not hold it yet; a failure is logged with what, never fatal.
func recordSetting(stateDir, name, value, what string, log *slog.Logger) {
	if v, ok := recorded(stateDir, name); ok && v == value {
		return
	}
	err := agent.MakeStateDir(stateDir)
	if err == nil {
		err = atomicfile.WriteFile(filepath.Join(stateDir, name), []byte(value+"\n"), 0o600)
	}
	if err != nil {
		log.Warn(what, "err", err)
	}
}

// recorded returns the value the state dir's file name records; ok is
// false when it records none (no such file, or unreadable).
func recorded(stateDir, name string) (value string, ok bool) {
	b, err := os.ReadFile(filepath.Join(stateDir, name))
	if err != nil {
		return "", false
	}
	return strings.TrimSpace(string(b)), true
}

// runDirOf is the run dir a cleanup tears down: --run-dir, else the one
// the state dir records.
func runDirOf(cfg Config) string {
	if cfg.RunDir != "" {
		return cfg.RunDir
	}
	v, _ := recorded(cfg.StateDir, runDirFile)
	return v
}

// ownedGroups says which child groups of parent Cleanup may treat as its
// own: all of them when the state dir records parent as its agent's
// (nil), else those named after a container the state dir knows (an
// agent from before the record). A state dir recording another parent
// refuses the cleanup (*ConfigError).
func ownedGroups(stateDir, parent string) (func(string) bool, error) {
	if rec, ok := recorded(stateDir, cgroupParentFile); ok {
		if rec != parent {
			return nil, bad("--cgroup-parent", "%s: the agent of state dir %s used %s; nothing removed", parent, stateDir, rec)
		}
		return nil, nil
	}
	known := map[string]bool{}
	for _, pattern := range []string{"containers/*", "runc/*", "checkpoint/*.json", "network/*.json"} {
		m, _ := filepath.Glob(filepath.Join(stateDir, pattern))
		for _, f := range m {
			known[strings.TrimSuffix(filepath.Base(f), ".json")] = true
		}
	}
	return func(child string) bool { return known[child] }, nil
}

// isStateDir reports whether dir holds an agent's ID, as every agent's
// state dir does from its first start.
func isStateDir(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "agent-id"))
	return err == nil
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
