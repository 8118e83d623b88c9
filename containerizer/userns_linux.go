package containerizer

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/brimnode/brim/internal/subid"
)

// prepareUserNSDir lets the root of a user namespace with range r reach
// the container directory dir: runc's init, already inside the namespace
// (host uid r.HostUID, gid r.HostGID, no capability over host-owned
// files), opens the rootfs mount point dir/rootfs by path. dir becomes
// root:r.HostGID 0710 (traversable by that group only, as containerd does
// with its bundles); the containers directory is already 0711; the state
// dir is given o+x (listing it stays root's). Every directory above the
// state dir must already be traversable by others: an error names the
// first that is not, rather than changing directories brim does not own.
func prepareUserNSDir(stateDir, dir string, r subid.Range) error {
	if err := os.Chown(dir, 0, int(r.HostGID)); err != nil {
		return fmt.Errorf("user namespace: own container directory: %w", err)
	}
	if err := os.Chmod(dir, 0o710); err != nil {
		return fmt.Errorf("user namespace: container directory mode: %w", err)
	}
	fi, err := os.Stat(stateDir)
	if err != nil {
		return fmt.Errorf("user namespace: %w", err)
	}
	if fi.Mode().Perm()&0o001 == 0 {
		if err := os.Chmod(stateDir, fi.Mode().Perm()|0o001); err != nil {
			return fmt.Errorf("user namespace: make the state dir traversable: %w", err)
		}
	}
	abs, err := filepath.Abs(stateDir)
	if err != nil {
		return fmt.Errorf("user namespace: %w", err)
	}
	for p := filepath.Dir(abs); ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("user namespace: %w", err)
		}
		if fi.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("user namespace: %s (mode %04o) above the state dir is not traversable by the namespace's root (host uid %d): chmod o+x %s, or use another --state-dir: %w",
				p, fi.Mode().Perm(), r.HostUID, p, ErrUserNS)
		}
		if p == "/" {
			return nil
		}
	}
}
