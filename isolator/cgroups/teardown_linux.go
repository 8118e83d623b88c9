package cgroups

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// teardownWait bounds how long Teardown waits for the killed processes
// to leave their groups.
const teardownWait = 10 * time.Second

// Teardown ends whatever runs under the parent and removes its groups,
// for `brim agent cleanup` once no agent runs (the caller holds
// LockParent): it freezes the parent (no process forks away meanwhile),
// SIGKILLs every process in its groups, thaws every group (a container
// frozen on its own would keep its killed processes), waits until no
// process is left, then removes every group below the parent and the
// parent itself, deepest first, in every hierarchy. It touches nothing
// outside the parent, and refuses, before it does anything, a parent
// that may not be the caller's (a wrong --cgroup-parent such as
// /system.slice): one with a child group that own does not claim (own
// says whether a child's name is one of the caller's containers; nil
// claims every child, for a parent the caller knows is its own), or whose
// groups hold this process, one of its ancestors or PID 1. A parent that
// does not exist is not an error: nothing to do. Errors wrap ErrInvalid
// for a refused parent and ErrBusy for processes that would not die.
func (i *Isolator) Teardown(ctx context.Context, own func(child string) bool) (TeardownReport, error) {
	var rep TeardownReport
	if own != nil {
		for _, d := range i.parentDirs() {
			if name, ok := i.childName(d); ok && !own(name) {
				return rep, fmt.Errorf("tear down cgroup parent %s: group %s is no container of this agent: refusing to touch the parent (check --cgroup-parent): %w", i.parent, d, ErrInvalid)
			}
		}
	}
	pids, err := i.parentPIDs()
	if err != nil {
		return rep, fmt.Errorf("tear down cgroup parent %s: %w", i.parent, err)
	}
	if pid, ok := protectedPID(pids); ok {
		return rep, fmt.Errorf("tear down cgroup parent %s: it holds pid %d (this process, one of its ancestors or init), not only containers: check --cgroup-parent: %w", i.parent, pid, ErrInvalid)
	}
	if len(pids) > 0 {
		killed, err := i.killAll(ctx, pids)
		rep.Killed = killed
		if err != nil {
			return rep, fmt.Errorf("tear down cgroup parent %s: %w", i.parent, err)
		}
	}
	removed, err := i.removeParent(ctx)
	rep.Removed = removed
	if err != nil {
		return rep, fmt.Errorf("tear down cgroup parent %s: %w", i.parent, err)
	}
	return rep, nil
}

// parentDirs lists the parent's directory and every group below it, in
// every hierarchy, parents before children.
func (i *Isolator) parentDirs() []string {
	var dirs []string
	for _, h := range i.hierarchies() {
		_ = filepath.WalkDir(filepath.Join(h, i.parent), func(p string, e fs.DirEntry, err error) error {
			if err == nil && e.IsDir() {
				dirs = append(dirs, p)
			}
			return nil // gone or unreadable: its rmdir reports it
		})
	}
	return dirs
}

// parentPIDs lists the processes in the parent's groups, in any
// hierarchy, each once.
func (i *Isolator) parentPIDs() ([]int, error) {
	seen := map[int]bool{}
	var out []int
	for _, h := range i.hierarchies() {
		pids, err := readProcs(filepath.Join(h, i.parent))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("list processes: %w", err)
		}
		for _, p := range pids {
			if !seen[p] {
				seen[p] = true
				out = append(out, p)
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

// protectedPID returns a pid of pids that must never be killed: init,
// this process and its ancestors.
func protectedPID(pids []int) (int, bool) {
	keep := map[int]bool{1: true}
	for p := os.Getpid(); p > 1 && !keep[p]; p = parentOf(p) {
		keep[p] = true
	}
	for _, p := range pids {
		if keep[p] {
			return p, true
		}
	}
	return 0, false
}

// parentOf is pid's parent per /proc (0 when it cannot be read).
func parentOf(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// pid (comm) state ppid …; comm may hold spaces and parentheses.
	rest := b[strings.LastIndexByte(string(b), ')')+1:]
	f := strings.Fields(string(rest))
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

// killAll freezes the parent, SIGKILLs pids, thaws every group and waits
// until no process is left in the parent's groups, killing newcomers
// (none can fork while frozen; one a thaw let through is killed on the
// next round).
func (i *Isolator) killAll(ctx context.Context, pids []int) ([]int, error) {
	i.freezeParent(true)
	killed := slices.Clone(pids)
	for _, p := range pids {
		_ = syscall.Kill(p, syscall.SIGKILL) // gone already: nothing to kill
	}
	i.freezeParent(false)
	deadline := time.Now().Add(teardownWait)
	for {
		left, err := i.parentPIDs()
		if err != nil {
			return killed, fmt.Errorf("list processes: %w", err)
		}
		if len(left) == 0 {
			return killed, nil
		}
		if pid, ok := protectedPID(left); ok {
			return killed, fmt.Errorf("pid %d entered the parent meanwhile: %w", pid, ErrInvalid)
		}
		if time.Now().After(deadline) {
			return killed, fmt.Errorf("%d processes still in the groups %v after SIGKILL (uninterruptible sleep?): %w", len(left), teardownWait, ErrBusy)
		}
		for _, p := range left {
			if !slices.Contains(killed, p) {
				killed = append(killed, p)
			}
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		t := time.NewTimer(20 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return killed, ctx.Err()
		case <-t.C:
		}
	}
}

// freezeParent freezes the parent's subtree, or thaws every group of it.
// Best effort: without a freezer the kill loop catches what forks.
func (i *Isolator) freezeParent(frozen bool) {
	if i.version == V2 {
		if frozen {
			_ = writeFile(filepath.Join(i.root, i.parent, "cgroup.freeze"), "1")
			return
		}
		for _, d := range i.parentDirs() {
			_ = writeFile(filepath.Join(d, "cgroup.freeze"), "0")
		}
		return
	}
	top := filepath.Join(i.root, "freezer", i.parent)
	if frozen {
		if writeFile(filepath.Join(top, "freezer.state"), "FROZEN") != nil {
			return
		}
		// Wait a moment for FROZEN; a task in uninterruptible sleep can
		// keep it FREEZING, and the kill loop copes with that.
		for range 100 {
			if b, err := os.ReadFile(filepath.Join(top, "freezer.state")); err != nil || strings.TrimSpace(string(b)) == "FROZEN" {
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
		return
	}
	_ = filepath.WalkDir(top, func(p string, e fs.DirEntry, err error) error {
		if err == nil && e.IsDir() {
			_ = writeFile(filepath.Join(p, "freezer.state"), "THAWED")
		}
		return nil
	})
}

// removeParent removes every group below the parent and the parent,
// deepest first, in every hierarchy, and returns the cgroup paths it
// removed (each once, children before the parent).
func (i *Isolator) removeParent(ctx context.Context) ([]string, error) {
	dirs := i.parentDirs()
	var removed []string
	seen := map[string]bool{}
	var errs []error
	for k := len(dirs) - 1; k >= 0; k-- {
		if err := rmdir(ctx, dirs[k]); err != nil {
			errs = append(errs, err)
			continue
		}
		rel := i.cgroupPath(dirs[k])
		if !seen[rel] {
			seen[rel] = true
			removed = append(removed, rel)
		}
	}
	// Children first, the parent last, in a stable order.
	slices.SortStableFunc(removed, func(a, b string) int {
		if d := strings.Count(b, "/") - strings.Count(a, "/"); d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	return removed, errors.Join(errs...)
}

// childName returns the name of the parent's child group that directory
// d is (ok false for the parent itself and deeper groups).
func (i *Isolator) childName(d string) (string, bool) {
	p := i.cgroupPath(d)
	rest, ok := strings.CutPrefix(p, i.parent+"/")
	if !ok || rest == "" || strings.Contains(rest, "/") {
		return "", false
	}
	return rest, true
}

// cgroupPath is the cgroup path of directory d of one of the hierarchies.
func (i *Isolator) cgroupPath(d string) string {
	rel, err := filepath.Rel(i.root, d)
	if err != nil {
		return d
	}
	if i.version == V1 {
		if _, rest, ok := strings.Cut(rel, string(filepath.Separator)); ok {
			rel = rest
		} else {
			rel = ""
		}
	}
	return "/" + rel
}
