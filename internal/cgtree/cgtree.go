package cgtree

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Root is where the cgroup hierarchies are mounted.
const Root = "/sys/fs/cgroup"

// ErrRefused is wrapped by Remove for a parent it will not touch.
var ErrRefused = errors.New("refusing to remove cgroup tree")

// Roots lists parent's directory in every hierarchy it exists in.
func Roots(parent string) []string {
	roots, _ := filepath.Glob(filepath.Join(Root, "*", parent)) // a bad pattern only: none here
	if fi, err := os.Stat(filepath.Join(Root, parent)); err == nil && fi.IsDir() {
		roots = append(roots, filepath.Join(Root, parent))
	}
	return roots
}

// Children lists the directories directly below parent, in every
// hierarchy (not parent itself).
func Children(parent string) []string {
	var out []string
	for _, r := range Roots(parent) {
		entries, _ := os.ReadDir(r) // gone meanwhile: nothing below
		for _, e := range entries {
			if e.IsDir() {
				out = append(out, filepath.Join(r, e.Name()))
			}
		}
	}
	return out
}

// Remove removes parent and everything below it in every hierarchy,
// deepest first, retrying each directory for about a second (a cgroup
// whose last process just exited may still be busy). parent must be
// absolute and name brim; anything else is refused (ErrRefused).
func Remove(parent string) error {
	clean := filepath.Clean(parent)
	if !filepath.IsAbs(parent) || clean == "/" || !strings.Contains(filepath.Base(clean), "brim") {
		return fmt.Errorf("%w %q: want an absolute path whose last element names brim", ErrRefused, parent)
	}
	var errs []error
	for _, d := range Roots(clean) {
		var dirs []string
		_ = filepath.WalkDir(d, func(p string, e fs.DirEntry, err error) error {
			if err == nil && e.IsDir() {
				dirs = append(dirs, p)
			}
			return nil // unreadable parts: their rmdir reports it
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			var err error
			for try := 0; try < 50; try++ {
				if err = os.Remove(dirs[i]); err == nil || errors.Is(err, os.ErrNotExist) {
					err = nil
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			if err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}
