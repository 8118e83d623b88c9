package atomicfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// WriteFile replaces name with data, with mode perm, durably (see the
// package doc). It is safe for concurrent use on different names; writers
// of the same name race only for which content stays, never mix.
func WriteFile(name string, data []byte, perm os.FileMode) error {
	return write(name, perm, true, bytesTo(data))
}

// WriteFunc is WriteFile for content too large to hold in memory: fill
// writes it (e.g. a database's consistent copy). An error from fill leaves
// name unchanged.
func WriteFunc(name string, perm os.FileMode, fill func(io.Writer) error) error {
	return write(name, perm, true, fill)
}

func bytesTo(data []byte) func(io.Writer) error {
	return func(w io.Writer) error { _, err := w.Write(data); return err }
}

// WriteFileNoSync replaces name with data atomically against a crash of
// the calling process, but not of the machine: nothing is fsynced.
func WriteFileNoSync(name string, data []byte, perm os.FileMode) error {
	return write(name, perm, false, bytesTo(data))
}

// Remove removes name durably: once it returns nil the removal survives a
// crash of the machine. A missing name is not an error (the directory is
// still fsynced, so an earlier removal is durable too).
func Remove(name string) error {
	if err := os.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", name, err)
	}
	if err := syncDir(filepath.Dir(name)); err != nil {
		return fmt.Errorf("remove %s: %w", name, err)
	}
	return nil
}

func write(name string, perm os.FileMode, sync bool, fill func(io.Writer) error) (err error) {
	dir := filepath.Dir(name)
	f, err := os.CreateTemp(dir, "."+filepath.Base(name)+".tmp*")
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = os.Remove(tmp)
			err = fmt.Errorf("write %s: %w", name, err)
		}
	}()
	if err := writeClose(f, fill, perm, sync); err != nil {
		return err
	}
	if err := os.Rename(tmp, name); err != nil {
		return err
	}
	if !sync {
		return nil
	}
	return syncDir(dir)
}

// writeClose fills f, sets its mode (CreateTemp makes 0600, whatever the
// umask would allow), optionally fsyncs, and closes it.
func writeClose(f *os.File, fill func(io.Writer) error, perm os.FileMode, sync bool) error {
	err := fill(f)
	if err == nil {
		err = f.Chmod(perm)
	}
	if err == nil && sync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
