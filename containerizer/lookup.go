package containerizer

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	securejoin "github.com/cyphar/filepath-securejoin"

	"github.com/brimnode/brim/executor"
	"github.com/brimnode/brim/internal/containerlog"
)

// resolveCommand checks, before anything is created, that argv0 names an
// executable file in the root filesystem rootfs ("" = host root), looking
// it up in the PATH of env like the container's init will. Symlinks are
// resolved inside rootfs. It returns an error wrapping ErrCommandNotFound.
func resolveCommand(rootfs, cwd, argv0 string, env []string) error {
	if rootfs == "" {
		rootfs = "/"
	}
	if cwd == "" {
		cwd = "/"
	}
	var candidates []string
	if strings.Contains(argv0, "/") {
		candidates = []string{argv0}
		if !filepath.IsAbs(argv0) {
			candidates[0] = filepath.Join(cwd, argv0)
		}
	} else {
		for _, dir := range filepath.SplitList(executor.PathOf(env)) {
			if dir == "" {
				dir = "."
			}
			if !filepath.IsAbs(dir) {
				dir = filepath.Join(cwd, dir)
			}
			candidates = append(candidates, filepath.Join(dir, argv0))
		}
	}
	for _, p := range candidates {
		host, err := securejoin.SecureJoin(rootfs, p)
		if err != nil {
			continue
		}
		fi, err := os.Stat(host)
		if err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return nil
		}
	}
	if strings.Contains(argv0, "/") {
		return fmt.Errorf("%w: %s: no such executable", ErrCommandNotFound, argv0)
	}
	return fmt.Errorf("%w: %s: not found in PATH %s", ErrCommandNotFound, argv0, executor.PathOf(env))
}

// validateSpec checks what Launch needs before it creates anything.
func validateSpec(spec *Spec) error {
	switch {
	case !executor.ValidID(spec.ID):
		return fmt.Errorf("invalid container id %q", spec.ID)
	case strings.HasPrefix(spec.ID, SandboxPrefix):
		return fmt.Errorf("invalid container id %q: %q starts the names of warm sandboxes only", spec.ID, SandboxPrefix)
	case len(spec.Command) == 0 || spec.Command[0] == "":
		return errors.New("empty command")
	case spec.Rootfs != "" && !filepath.IsAbs(spec.Rootfs):
		return fmt.Errorf("rootfs %q is not absolute", spec.Rootfs)
	case spec.Cwd != "" && !filepath.IsAbs(spec.Cwd):
		return fmt.Errorf("working directory %q is not absolute", spec.Cwd)
	}
	if err := (containerlog.Limits{MaxSize: spec.LogMaxSize, MaxFiles: spec.LogMaxFiles}).Validate(); err != nil {
		return err
	}
	if err := checkImageSpec(spec); err != nil {
		return err
	}
	if spec.Image != "" {
		// The image's root is its layers stacked: the shim reports a
		// command missing there (ErrCommandNotFound), and the launch
		// leaves nothing behind.
		return nil
	}
	if spec.Rootfs != "" {
		if fi, err := os.Stat(spec.Rootfs); err != nil || !fi.IsDir() {
			return fmt.Errorf("rootfs %q is not a directory: %w", spec.Rootfs, errors.Join(err, os.ErrNotExist))
		}
	}
	if err := checkWorkDir(spec.Rootfs, spec.Cwd); err != nil {
		return err
	}
	return resolveCommand(spec.Rootfs, spec.Cwd, spec.Command[0], spec.Env)
}

// writableMounts are the container's writable mounts over its read-only
// root (executor.RuntimeSpec): a working directory missing below one of
// them is made at start, as Docker makes a missing one.
var writableMounts = []string{"/tmp", executor.SandboxMountPoint}

// checkWorkDir checks, before anything is created, that the container can
// start in cwd: a directory of the root filesystem rootfs ("" = host
// root), or any path below a writable mount (made at start). The root is
// read-only: runc's attempt to make a missing directory there failed the
// start with "mkdir /x: read-only file system". Errors wrap ErrNoWorkDir.
func checkWorkDir(rootfs, cwd string) error {
	if cwd == "" || cwd == "/" {
		return nil
	}
	for _, m := range writableMounts {
		if cwd == m || strings.HasPrefix(cwd, m+"/") {
			return nil
		}
	}
	if rootfs == "" {
		rootfs = "/"
	}
	host, err := securejoin.SecureJoin(rootfs, cwd)
	if err == nil {
		fi, serr := os.Stat(host)
		if serr == nil && fi.IsDir() {
			return nil
		}
		err = serr
		if serr == nil {
			err = errors.New("not a directory")
		}
	}
	return fmt.Errorf("%w: %s: %v in the container's root filesystem, which is read-only; use an existing directory, or one below %s (made at start)",
		ErrNoWorkDir, cwd, shortErr(err), strings.Join(writableMounts, " or "))
}

// shortErr is err's text without the path an *os.PathError repeats.
func shortErr(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}
