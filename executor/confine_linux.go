package executor

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/opencontainers/cgroups"
	"golang.org/x/sys/unix"
)

// ErrNotConfined is returned when a container's init is not in the cgroup
// or network namespace its bundle names; the user process never runs.
var ErrNotConfined = errors.New("container init not confined as its bundle requires")

// verifyConfinement checks, before the user process runs, that the init
// (pid) is where libcontainer was told to put it: in the cgroup at
// b.CgroupPath of each hierarchy brim's isolators manage (v1: cpu, memory,
// pids; v2: the unified hierarchy) and, when b.NetNSPath names one, in
// that network namespace. These are the facts the isolators' Isolate
// checks; done here they cost no round trip to the containerizer.
func verifyConfinement(pid int, b *Bundle) error {
	if err := verifyCgroup(pid, b.CgroupPath, cgroups.IsCgroup2UnifiedMode()); err != nil {
		return err
	}
	if b.NetNSPath == "" {
		return nil
	}
	var want, got unix.Stat_t
	if err := unix.Stat(b.NetNSPath, &want); err != nil {
		return fmt.Errorf("verify network namespace: %w", err)
	}
	if err := unix.Stat("/proc/"+strconv.Itoa(pid)+"/ns/net", &got); err != nil {
		return fmt.Errorf("verify network namespace: %w", err)
	}
	if got.Dev != want.Dev || got.Ino != want.Ino {
		return fmt.Errorf("init %d is not in network namespace %s: %w", pid, b.NetNSPath, ErrNotConfined)
	}
	return nil
}

// verifyCgroup reads /proc/<pid>/cgroup (paths as seen from the shim's
// cgroup namespace, the host's) and checks the managed hierarchies.
func verifyCgroup(pid int, path string, unified bool) error {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return fmt.Errorf("verify cgroup: %w", err)
	}
	defer f.Close()
	return checkCgroupFile(f, path, unified, pid)
}

// checkCgroupFile is verifyCgroup's parser, separate for tests. A
// hierarchy the host does not mount (no line for it) is not checked; at
// least one must be there.
func checkCgroupFile(f io.Reader, path string, unified bool, pid int) error {
	want := map[string]bool{"cpu": false, "memory": false, "pids": false}
	if unified {
		want = map[string]bool{"": false}
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// hierarchy-ID:controller-list:path
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, ctrl := range strings.Split(parts[1], ",") {
			if _, ok := want[ctrl]; !ok || (ctrl == "" && parts[0] != "0") {
				continue
			}
			if parts[2] != path {
				return fmt.Errorf("init %d is in cgroup %s of %q, not %s: %w", pid, parts[2], hierarchyName(ctrl), path, ErrNotConfined)
			}
			want[ctrl] = true
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("verify cgroup: %w", err)
	}
	for _, seen := range want {
		if seen {
			return nil
		}
	}
	return fmt.Errorf("init %d: none of the managed cgroup hierarchies in its cgroup file: %w", pid, ErrNotConfined)
}

func hierarchyName(ctrl string) string {
	if ctrl == "" {
		return "unified"
	}
	return ctrl
}
