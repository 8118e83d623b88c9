package boltstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/brimnode/brim/internal/atomicfile"
	"github.com/brimnode/brim/internal/lockfile"
	bolt "go.etcd.io/bbolt"
)

// Backups of the store (brim master --backup-interval, --backup-keep).
const (
	// BackupDir is the directory, next to master.db, of the backups.
	BackupDir = "backups"
	// DefaultBackupInterval and DefaultBackupKeep: a backup an hour, the
	// last day's kept.
	DefaultBackupInterval = time.Hour
	DefaultBackupKeep     = 24
)

// backupName is a backup's file name at t; names sort by time.
func backupName(t time.Time) string {
	return "master-" + t.UTC().Format("20060102T150405.000Z") + ".db"
}

// Backup writes a consistent copy of the store to path (bbolt's copy in a
// read transaction: writers go on meanwhile), fsynced, and renames it into
// place: path is whole or absent.
func (s *Store) Backup(path string) error {
	err := guard(s.path, func() error {
		return s.db.View(func(tx *bolt.Tx) error {
			return atomicfile.WriteFunc(path, 0o600, func(w io.Writer) error {
				_, err := tx.WriteTo(w)
				return err
			})
		})
	})
	if err != nil {
		return fmt.Errorf("back up master store to %s: %w", path, err)
	}
	return nil
}

// RunBackups writes a backup into dir (created) at once and then every
// interval until ctx ends, keeping the newest keep (≥ 1) and removing
// older ones. Failures are logged; the next interval tries again.
func (s *Store) RunBackups(ctx context.Context, dir string, interval time.Duration, keep int, log *slog.Logger) {
	if keep < 1 {
		keep = 1
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if err := s.backupInto(dir, keep); err != nil {
			log.Error("back up master store", "dir", dir, "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// backupInto writes one backup into dir and prunes it to keep.
func (s *Store) backupInto(dir string, keep int) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := s.Backup(filepath.Join(dir, backupName(time.Now()))); err != nil {
		return err
	}
	names, err := Backups(dir)
	if err != nil {
		return err
	}
	var errs []error
	for len(names) > keep {
		if err := os.Remove(names[0]); err != nil {
			errs = append(errs, err)
		}
		names = names[1:]
	}
	return errors.Join(errs...)
}

// Backups lists the backups in dir, oldest first.
func Backups(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if n := e.Name(); strings.HasPrefix(n, "master-") && strings.HasSuffix(n, ".db") && e.Type().IsRegular() {
			out = append(out, filepath.Join(dir, n))
		}
	}
	slices.Sort(out)
	return out, nil
}

// Restore replaces STATE-DIR/master.db with the store file from (a
// backup), after checking it. It refuses (ErrStoreBusy) while a master
// holds the store, and a damaged or empty from (ErrCorruptStore). The
// replaced file is kept as master.db.before-restore-TIME. Run as root, it
// gives both files the state dir's owner, so that a master running as
// that user (the package's brim) can open the restored store.
func Restore(from, stateDir string) error {
	db, err := openChecked(from, time.Second, true)
	if err != nil {
		return fmt.Errorf("restore from %s: %w", from, err)
	}
	if err := db.Close(); err != nil {
		return fmt.Errorf("restore from %s: %w", from, err)
	}
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	dst := filepath.Join(stateDir, "master.db")
	_, statErr := os.Stat(dst)
	// bbolt locks the file itself: holding its lock keeps a master from
	// opening the old file while it is replaced.
	lk, err := lockfile.File(dst)
	if errors.Is(err, lockfile.ErrLocked) {
		return fmt.Errorf("restore %s: %w: a master is running on it; stop it first", dst, ErrStoreBusy)
	}
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	defer func() { _ = lk.Close() }() // the lock only; the file is written by then
	data, err := os.ReadFile(from)
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	written := []string{dst}
	if statErr == nil {
		old := fmt.Sprintf("%s.before-restore-%s", dst, time.Now().UTC().Format("20060102T150405Z"))
		if err := copyFile(dst, old); err != nil {
			return fmt.Errorf("restore: keep the old store: %w", err)
		}
		written = append(written, old)
	}
	if err := atomicfile.WriteFile(dst, data, 0o600); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	if err := ownLikeDir(stateDir, written...); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	return nil
}

func copyFile(from, to string) error {
	data, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(to, data, 0o600)
}
