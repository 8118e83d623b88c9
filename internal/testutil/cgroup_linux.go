package testutil

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// CgroupRoot is where the cgroup hierarchies are mounted.
const CgroupRoot = "/sys/fs/cgroup"

// CgroupV2 reports whether the host mounts the unified hierarchy alone
// (cgroup2 at CgroupRoot), as every current distribution boots.
func CgroupV2() bool {
	st, err := os.Stat(filepath.Join(CgroupRoot, "cgroup.controllers"))
	return err == nil && !st.IsDir()
}

// CgroupBaseEnv names the environment variable that nests test parents:
// when set (an absolute cgroup path, e.g. "/system.slice/brim.service" in the
// v2 lane's systemd-like layout), NewCgroupParent returns parents under it.
// The caller owns that subtree and keeps no process in its inner nodes.
const CgroupBaseEnv = "BRIM_TEST_CGROUP_BASE"

// NewCgroupParent returns a unique absolute cgroup parent path (e.g.
// "/brim-test-1a2b3c4d", relative to each hierarchy's root, nested under
// $BRIM_TEST_CGROUP_BASE when set) for one test. The test's code creates
// groups under it; on cleanup every directory under that parent in every
// hierarchy is removed, deepest first. It never touches a cgroup outside
// that parent.
func NewCgroupParent(t testing.TB) string {
	t.Helper()
	RequireRoot(t)
	base := os.Getenv(CgroupBaseEnv)
	if base != "" && (!filepath.IsAbs(base) || filepath.Clean(base) != base) {
		t.Fatalf("%s=%q: want an absolute, clean cgroup path", CgroupBaseEnv, base)
	}
	parent := filepath.Join("/", base, UniqueName("brim-test"))
	t.Cleanup(func() { RemoveCgroupTree(t, parent) })
	if CgroupV2() {
		if err := delegateV2(filepath.Join(CgroupRoot, parent)); err != nil {
			t.Fatal(err)
		}
	}
	return parent
}

// delegateV2 makes the v2 directory dir (a new test parent) and enables in
// its cgroup.subtree_control every controller it was given, as brim does
// for the parent it owns: its children (the containers' groups) get them.
// The parent holds no process, so the no-internal-processes rule holds.
func delegateV2(dir string) error {
	if err := os.Mkdir(dir, 0o755); err != nil {
		return fmt.Errorf("create cgroup parent: %w", err)
	}
	avail, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return fmt.Errorf("read controllers of %s: %w", dir, err)
	}
	var on []string
	for _, c := range strings.Fields(string(avail)) {
		on = append(on, "+"+c)
	}
	if len(on) == 0 {
		return nil
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte(strings.Join(on, " ")), 0); err != nil {
		return fmt.Errorf("enable %v in %s: %w", on, dir, err)
	}
	return nil
}

// RemoveCgroupTree removes the cgroup directory parent (absolute, relative to
// the hierarchy roots, and containing "brim") from every mounted hierarchy,
// children first. Processes still inside make rmdir fail; it retries briefly
// and reports what is left.
func RemoveCgroupTree(t testing.TB, parent string) {
	t.Helper()
	if parent == "" || parent == "/" || !filepath.IsAbs(parent) {
		t.Errorf("refusing to remove cgroup tree %q", parent)
		return
	}
	dirs, _ := filepath.Glob(filepath.Join(CgroupRoot, "*", parent))
	if CgroupV2() {
		dirs = append(dirs, filepath.Join(CgroupRoot, parent))
	}
	for _, d := range dirs {
		var subdirs []string
		_ = filepath.WalkDir(d, func(p string, e os.DirEntry, err error) error {
			if err == nil && e.IsDir() {
				subdirs = append(subdirs, p)
			}
			return nil
		})
		for i := len(subdirs) - 1; i >= 0; i-- {
			var err error
			for try := 0; try < 50; try++ {
				if err = os.Remove(subdirs[i]); err == nil || os.IsNotExist(err) {
					err = nil
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			if err != nil {
				t.Errorf("cleanup cgroup: %v", err)
			}
		}
	}
}

// CgroupDir returns the directory of cgroup path p (absolute, relative to
// the hierarchy roots) in controller ctrl's hierarchy: CgroupRoot/ctrl/p on
// v1, CgroupRoot/p on v2 (ctrl ignored).
func CgroupDir(ctrl, p string) string {
	if CgroupV2() {
		return filepath.Join(CgroupRoot, p)
	}
	return filepath.Join(CgroupRoot, ctrl, p)
}

// CgroupDirs returns the existing directories of cgroup path p in every
// mounted hierarchy (one on v2).
func CgroupDirs(p string) []string {
	if CgroupV2() {
		d := filepath.Join(CgroupRoot, p)
		if _, err := os.Stat(d); err != nil {
			return nil
		}
		return []string{d}
	}
	dirs, _ := filepath.Glob(filepath.Join(CgroupRoot, "*", p))
	return dirs
}

// SetCPUShares gives cgroup path p the cpu weight of v1 cpu.shares shares:
// cpu.shares on v1, cpu.weight on v2 (converted as isolator/cgroups.Weight
// does, the mapping runc and systemd use).
func SetCPUShares(t testing.TB, p string, shares uint64) {
	t.Helper()
	file, value := "cpu.shares", strconv.FormatUint(shares, 10)
	if CgroupV2() {
		file, value = "cpu.weight", strconv.FormatUint(1+((max(shares, 2)-2)*9999)/262142, 10)
	}
	if err := os.WriteFile(filepath.Join(CgroupDir("cpu", p), file), []byte(value), 0); err != nil {
		t.Fatalf("set %s of %s: %v", file, p, err)
	}
}
