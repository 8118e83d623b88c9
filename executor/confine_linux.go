package executor

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrNotConfined is returned when a container's init is not in the cgroup
// or network namespace its bundle names; the user process never runs.
var ErrNotConfined = errors.New("container init not confined as its bundle requires")

// verifyConfinement checks, before the user process runs, that the init
// (pid) is in the cgroup at b.CgroupPath of every hierarchy in
// hierarchies (v1 subsystem names, "name=systemd", "" for the unified
// tree; nil: the unified tree alone, which libcontainer joined on a v2
// host) and, when b.NetNSPath names one, in that network namespace. These
// are the facts the isolators' Isolate checks; done here they cost no
// round trip to the containerizer.
func verifyConfinement(pid int, b *Bundle, hierarchies []string) error {
	if hierarchies == nil {
		hierarchies = []string{""}
	}
	if err := verifyCgroup(pid, b.CgroupPath, hierarchies); err != nil {
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
// cgroup namespace, the host's) and checks the hierarchies.
func verifyCgroup(pid int, path string, hierarchies []string) error {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return fmt.Errorf("verify cgroup: %w", err)
	}
	defer f.Close()
	return checkCgroupFile(f, path, hierarchies, pid)
}

// checkCgroupFile is verifyCgroup's parser, separate for tests: every
// hierarchy must have its line, with path.
func checkCgroupFile(f io.Reader, path string, hierarchies []string, pid int) error {
	want := make(map[string]bool, len(hierarchies))
	for _, h := range hierarchies {
		want[h] = false
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
	for _, h := range hierarchies {
		if !want[h] {
			return fmt.Errorf("init %d: no %q hierarchy in its cgroup file: %w", pid, hierarchyName(h), ErrNotConfined)
		}
	}
	return nil
}

func hierarchyName(ctrl string) string {
	if ctrl == "" {
		return "unified"
	}
	return ctrl
}
