package containerizer

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/brimnode/brim/executor"
)

// maxDataSpares bounds the spare data directories kept: more than the
// launches of a burst, no more than a few hundred empty inodes.
const maxDataSpares = 64

// spareSuffix names the directory beside the data root that holds the
// spares (on the same file system, so that taking one is a rename).
const spareSuffix = ".spare"

// dataSpares are the data directories of ended containers, emptied, kept
// for the next containers: with a run dir (Config.RunDir) a container's
// data directory and its log directory are the only directories a launch
// makes on the state dir's disk. On ext4 every inode allocation scans
// past the inodes freed in the last five minutes (docs/benchmarks.md, End
// to end): a data directory taken from a spare is a rename, and one given
// back frees nothing. Only what root made is kept — the data directory
// and its log directory, emptied, root's and 0700 again; the sandbox,
// which the task's user owns (and could have given ACLs or extended
// attributes), is removed as before, and so is anything unexpected.
type dataSpares struct {
	dir string

	mu   sync.Mutex
	free []string // names in dir
	seq  uint64
}

// newDataSpares makes the spares' directory beside dataRoot. Spares of a
// previous run are removed: their emptying may have been cut short.
func newDataSpares(dataRoot string) (*dataSpares, error) {
	dir := dataRoot + spareSuffix
	if err := os.RemoveAll(dir); err != nil {
		return nil, fmt.Errorf("spare data dirs: %w", err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, fmt.Errorf("spare data dirs: %w", err)
	}
	return &dataSpares{dir: dir}, nil
}

// take makes the data directory data (mode 0700, root's): a spare
// renamed there, or a new directory. An existing data is os.ErrExist,
// as a mkdir's.
func (s *dataSpares) take(data string) error {
	if s == nil {
		return os.Mkdir(data, 0o700)
	}
	s.mu.Lock()
	var name string
	if n := len(s.free); n > 0 {
		name, s.free = s.free[n-1], s.free[:n-1]
	}
	s.mu.Unlock()
	if name == "" {
		return os.Mkdir(data, 0o700)
	}
	err := unix.Renameat2(unix.AT_FDCWD, filepath.Join(s.dir, name), unix.AT_FDCWD, data, unix.RENAME_NOREPLACE)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.EEXIST):
		s.push(name)
		return &os.PathError{Op: "mkdir", Path: data, Err: os.ErrExist}
	default:
		// The spare is unusable (gone, or renameat2 refused): a new
		// directory, and the spare is dropped.
		_ = os.RemoveAll(filepath.Join(s.dir, name))
		return os.Mkdir(data, 0o700)
	}
}

func (s *dataSpares) push(name string) {
	s.mu.Lock()
	s.free = append(s.free, name)
	s.mu.Unlock()
}

// give removes the ended container's data directory data: emptied and
// kept as a spare while there are fewer than maxDataSpares, removed
// otherwise (or when it cannot be emptied).
func (s *dataSpares) give(data string) error {
	if s == nil {
		return os.RemoveAll(data)
	}
	if _, err := os.Lstat(data); errors.Is(err, os.ErrNotExist) {
		return nil // as os.RemoveAll
	}
	s.mu.Lock()
	full := len(s.free) >= maxDataSpares
	s.seq++
	name := strconv.FormatUint(s.seq, 10)
	s.mu.Unlock()
	if full {
		return os.RemoveAll(data)
	}
	if err := emptyDataDir(data); err != nil {
		return errors.Join(err, os.RemoveAll(data))
	}
	if err := unix.Renameat2(unix.AT_FDCWD, data, unix.AT_FDCWD, filepath.Join(s.dir, name), unix.RENAME_NOREPLACE); err != nil {
		return os.RemoveAll(data)
	}
	s.push(name)
	return nil
}

// emptyDataDir empties data for a spare: every entry removed but the log
// directory, which is emptied when it is what the shim makes (root's,
// 0700, a directory), and data made root's and 0700 again (a user
// namespace's launch gives it to the namespace's group).
func emptyDataDir(data string) error {
	ents, err := os.ReadDir(data)
	if err != nil {
		return err
	}
	for _, e := range ents {
		p := filepath.Join(data, e.Name())
		if e.Name() == executor.LogDir && rootsPrivateDir(p) {
			if err := emptyDir(p); err != nil {
				return err
			}
			continue
		}
		if err := os.RemoveAll(p); err != nil {
			return err
		}
	}
	if err := os.Chown(data, 0, 0); err != nil {
		return err
	}
	return os.Chmod(data, 0o700)
}

// rootsPrivateDir reports whether p is a directory (not a link to one)
// owned by root, mode 0700.
func rootsPrivateDir(p string) bool {
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		return false
	}
	return st.Mode&unix.S_IFMT == unix.S_IFDIR && st.Uid == 0 && st.Gid == 0 && st.Mode&0o7777 == 0o700
}

// emptyDir removes every entry of dir.
func emptyDir(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}
