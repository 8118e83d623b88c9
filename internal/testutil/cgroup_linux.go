package testutil

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CgroupRoot is where the cgroup hierarchies are mounted.
const CgroupRoot = "/sys/fs/cgroup"

// NewCgroupParent returns a unique absolute cgroup parent path (e.g.
// "/brim-test-1a2b3c4d", relative to each hierarchy's root) for one test.
// The test's code creates groups under it; on cleanup every directory under
// that parent in every hierarchy is removed, deepest first. It never touches
// a cgroup outside that parent.
func NewCgroupParent(t testing.TB) string {
	t.Helper()
	RequireRoot(t)
	parent := "/" + UniqueName("brim-test")
	t.Cleanup(func() { RemoveCgroupTree(t, parent) })
	return parent
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
	if u, err := os.Stat(filepath.Join(CgroupRoot, "cgroup.controllers")); err == nil && !u.IsDir() {
		dirs = append(dirs, filepath.Join(CgroupRoot, parent)) // pure v2 host
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
