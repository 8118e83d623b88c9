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
	return resolveCommand(spec.Rootfs, spec.Cwd, spec.Command[0], spec.Env)
}
