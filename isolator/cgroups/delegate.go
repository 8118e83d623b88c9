package cgroups

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/brimnode/brim/isolator"
)

// OwnV2 returns the v2 cgroup path of process pid (0: the caller) from
// /proc/<pid>/cgroup's "0::" line, e.g. "/system.slice/brim-agent.service".
// Errors wrap isolator.ErrNotSupported when the process is in no v2 group.
func OwnV2(pid int) (string, error) {
	p := "/proc/self/cgroup"
	if pid > 0 {
		p = "/proc/" + strconv.Itoa(pid) + "/cgroup"
	}
	f, err := os.Open(p)
	if err != nil {
		return "", fmt.Errorf("own cgroup: %w", err)
	}
	defer f.Close()
	return parseOwnV2(f)
}

func parseOwnV2(r io.Reader) (string, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if p, ok := strings.CutPrefix(sc.Text(), "0::"); ok && path.IsAbs(p) {
			return path.Clean(strings.TrimSuffix(p, " (deleted)")), nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("own cgroup: %w", err)
	}
	return "", fmt.Errorf("own cgroup: no cgroup v2 line: %w", isolator.ErrNotSupported)
}

// EnterLeafV2 moves process pid (0: the caller; every thread of it) from
// its v2 cgroup own into the leaf own/leaf (made if missing) and returns
// own, so that own holds no process and may enable controllers for its
// children (the no-internal-processes rule). Under systemd with
// Delegate=yes own is the unit's cgroup, which the unit's process owns:
// the agent calls this once at start, before an Isolator whose Parent and
// Delegated lie in own (e.g. Parent own/containers, Delegated own). Shims
// it starts later inherit own/leaf. It is the one place this package moves
// a process, and only the caller's own one. A process already in a leaf
// named leaf stays there and own is that leaf's parent. root is the v2
// mount (DefaultRoot).
func EnterLeafV2(root string, pid int, leaf string) (string, error) {
	if leaf == "" || strings.ContainsAny(leaf, "/\x00") || leaf == "." || leaf == ".." {
		return "", fmt.Errorf("enter leaf %q: %w", leaf, ErrInvalid)
	}
	own, err := OwnV2(pid)
	if err != nil {
		return "", fmt.Errorf("enter leaf %s: %w", leaf, err)
	}
	if path.Base(own) == leaf && own != "/"+leaf {
		return path.Dir(own), nil
	}
	if own == "/" {
		return "", fmt.Errorf("enter leaf %s: the process is in the root cgroup, which brim does not own: %w", leaf, ErrInvalid)
	}
	d := filepath.Join(root, own, leaf)
	if err := os.Mkdir(d, 0o755); err != nil && !os.IsExist(err) {
		return "", fmt.Errorf("enter leaf %s: %w", leaf, err)
	}
	if err := writeFile(filepath.Join(d, "cgroup.procs"), strconv.Itoa(pid)); err != nil {
		return "", fmt.Errorf("enter leaf %s: move pid %d: %w", leaf, pid, err)
	}
	return own, nil
}
