package atomicfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// Dir rewrites the records of one directory (a record per task, say)
// without making a file for each write: WriteFile's temporary file is a
// new inode every time, and a file system that allocates inodes slowly
// after many deletions (ext4 without a journal skips, at every
// allocation, each inode freed in the last five minutes) makes that the
// dearest part of a launch's bookkeeping.
//
// Each record has an alternate of its name in the Dir's work directory
// (the records' directory's sibling, "<dir>.work"): a write fills the
// alternate in place and exchanges the two (renameat2 RENAME_EXCHANGE),
// so the record is always whole (the old content or the new) and the old
// content becomes the next write's alternate. Remove moves a record and
// its alternate to the work directory as spares (".spare-N", up to a
// number) that new records take instead of new files. A file is
// overwritten, never emptied first (see overwrite). The records'
// directory holds the records only.
//
// Writes of one Dir are serialised; a Dir must be the only writer of its
// directory's records.
type Dir struct {
	path     string // the records
	work     string // their alternates and the spares
	maxSpare int

	mu    sync.Mutex
	spare []string // files of ours in work, ready to take a record
	next  int      // the next spare's number
}

// NewDir returns the Dir of path (created 0700 when missing, with its
// work directory), keeping up to maxSpare spares. Spares and alternates
// an earlier Dir left are reused.
func NewDir(path string, maxSpare int) (*Dir, error) {
	d := &Dir{path: path, work: WorkDir(path), maxSpare: maxSpare}
	for _, p := range []string{d.path, d.work} {
		if err := os.MkdirAll(p, 0o700); err != nil {
			return nil, fmt.Errorf("record dir: %w", err)
		}
	}
	ents, err := os.ReadDir(d.work)
	if err != nil {
		return nil, fmt.Errorf("record dir: %w", err)
	}
	for _, e := range ents {
		if n, ok := strings.CutPrefix(e.Name(), spareName); ok && e.Type().IsRegular() {
			if i, err := strconv.Atoi(n); err == nil {
				d.next = max(d.next, i+1)
				d.spare = append(d.spare, e.Name())
			}
		}
	}
	return d, nil
}

// WorkDir is the work directory of the Dir of path.
func WorkDir(path string) string { return filepath.Clean(path) + ".work" }

const spareName = ".spare-"

// WriteFile replaces name's content with data, with mode perm: durably
// (as the package's WriteFile) when sync, else atomically against a crash
// of the process only (WriteFileNoSync).
func (d *Dir) WriteFile(name string, data []byte, perm os.FileMode, sync bool) error {
	if err := checkName(name); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.write(name, data, perm, sync); err != nil {
		return fmt.Errorf("write %s: %w", filepath.Join(d.path, name), err)
	}
	return nil
}

func (d *Dir) write(name string, data []byte, perm os.FileMode, sync bool) error {
	live, alt := filepath.Join(d.path, name), filepath.Join(d.work, name)
	f, err := d.openAlt(alt, perm)
	if err != nil {
		return err
	}
	if err := overwrite(f, data, perm, sync); err != nil {
		return err
	}
	switch err := exchange(alt, live); {
	case err == nil:
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, errNoExchange):
		// No record yet, or a file system without the exchange: the
		// alternate becomes the record.
		if err := os.Rename(alt, live); err != nil {
			return err
		}
	default:
		return err
	}
	if sync {
		return syncDir(d.path)
	}
	return nil
}

// overwrite replaces f's content with data from its start, then cuts
// what is left of the old content, sets its mode, optionally fsyncs, and
// closes it. Never emptied first: on ext4 a file truncated to zero has
// its blocks allocated and written out when it is closed (auto_da_alloc,
// meant for programs that rewrite a file in place without fsync), an I/O
// at every write of a record, durable or not.
func overwrite(f *os.File, data []byte, perm os.FileMode, sync bool) error {
	return writeClose(f, func(io.Writer) error {
		if _, err := f.WriteAt(data, 0); err != nil {
			return err
		}
		return f.Truncate(int64(len(data)))
	}, perm, sync)
}

// openAlt opens alt for writing: the record's alternate, else a spare
// renamed to it, else a new file.
func (d *Dir) openAlt(alt string, perm os.FileMode) (*os.File, error) {
	flags := os.O_WRONLY | oNoFollow
	f, err := os.OpenFile(alt, flags, 0)
	if !errors.Is(err, fs.ErrNotExist) {
		return f, err
	}
	for len(d.spare) > 0 {
		s := d.spare[len(d.spare)-1]
		d.spare = d.spare[:len(d.spare)-1]
		if err := os.Rename(filepath.Join(d.work, s), alt); err == nil {
			return os.OpenFile(alt, flags, 0)
		} // gone (removed by someone else): the next, or a new file
	}
	return os.OpenFile(alt, flags|os.O_CREATE|os.O_EXCL, perm)
}

// Remove removes name and its alternate, keeping them as spares while
// there are fewer than the Dir's maximum. With sync the removal is
// durable (as the package's Remove). A missing name is not an error.
func (d *Dir) Remove(name string, sync bool) error {
	if err := checkName(name); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	var errs []error
	for _, p := range []string{filepath.Join(d.path, name), filepath.Join(d.work, name)} {
		if err := d.retire(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 && sync {
		errs = append(errs, syncDir(d.path))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("remove %s: %w", filepath.Join(d.path, name), err)
	}
	return nil
}

// retire makes p a spare, or removes it when there are enough. A spare
// keeps its bytes until a record takes it (overwrite): the work
// directory is its owner's alone (0700), as the records' directory is.
func (d *Dir) retire(p string) error {
	if len(d.spare) >= d.maxSpare {
		return os.Remove(p)
	}
	s := spareName + strconv.Itoa(d.next)
	if err := os.Rename(p, filepath.Join(d.work, s)); err != nil {
		return err
	}
	d.next++
	d.spare = append(d.spare, s)
	return nil
}

// checkName refuses a name that is not one plain file name of a record.
func checkName(name string) error {
	if name == "" || name != filepath.Base(name) || strings.HasPrefix(name, ".") {
		return fmt.Errorf("record name %q: want a file name not starting with a dot", name)
	}
	return nil
}
