package bpf

import (
	"fmt"
	"path/filepath"
	"strings"
)

// layout says where a cgroup's files are: per-controller hierarchies under
// root on v1 (and hybrid) hosts, one tree on unified (v2) hosts.
type layout struct {
	root    string
	unified bool
}

// dir returns the directory of the cgroup path (absolute, relative to the
// hierarchy roots, e.g. "/brim/c1") in controller ctrl's hierarchy.
func (l layout) dir(ctrl, path string) (string, error) {
	if !filepath.IsAbs(path) || path == "/" {
		return "", fmt.Errorf("cgroup path %q: must be absolute and not the root", path)
	}
	for _, elem := range strings.Split(path, "/") {
		if elem == ".." {
			return "", fmt.Errorf("cgroup path %q: must not contain a parent element", path)
		}
	}
	clean := filepath.Clean(path)
	if l.unified {
		return filepath.Join(l.root, clean), nil
	}
	return filepath.Join(l.root, ctrl, clean), nil
}
