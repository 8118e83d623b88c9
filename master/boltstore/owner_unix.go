//go:build unix

package boltstore

import (
	"fmt"
	"os"
	"syscall"
)

// ownLikeDir gives the files the owner and group of dir when the caller
// is root and they differ: a store that root restores into a master's
// state dir (brim master restore, run by an operator) stays openable by
// the master's own user (the package's brim-master.service runs as brim).
// A caller that is not root owns what it writes already.
func ownLikeDir(dir string, files ...string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || (st.Uid == 0 && st.Gid == 0) {
		return nil
	}
	for _, f := range files {
		if err := os.Lchown(f, int(st.Uid), int(st.Gid)); err != nil {
			return fmt.Errorf("give %s the owner of %s: %w", f, dir, err)
		}
	}
	return nil
}
