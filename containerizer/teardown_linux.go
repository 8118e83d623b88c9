package containerizer

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// shimExitWait bounds how long Teardown waits for a shim to leave on its
// own once its container is dead (it records the exit and destroys the
// container's state) before it kills it.
const shimExitWait = 5 * time.Second

// Teardown removes what containerizers on stateDir left, with none
// running (`brim agent cleanup`, after the agent died): the shims still
// alive — each checked to be a shim of this state dir by its command line
// or directory, never another process — get shimExitWait to leave on
// their own (their containers should be killed first, through the
// cgroups) and are then killed, warm shims waiting for a container too;
// then whatever is mounted below the state dir (never the state dir
// itself), the containers' directories (bundles, sandboxes with the
// containers' output, exit records), the warm sandboxes' ("removed warm
// sandbox …": the agent's own, expected) and libcontainer's state. It returns what it did, one line
// each ("killed …", "removed …"), nothing when there was nothing (a
// second call). It carries on past
// errors and returns them joined. runDir is the containerizers' RunDir
// ("": none): the runtime state is there, the sandboxes and output in
// stateDir.
func Teardown(ctx context.Context, stateDir, runDir string) ([]string, error) {
	if !filepath.IsAbs(stateDir) {
		return nil, fmt.Errorf("tear down containers: state dir %q is not absolute", stateDir)
	}
	cfg := Config{StateDir: stateDir, RunDir: runDir}
	if err := cfg.settleRunDir(); err != nil {
		return nil, fmt.Errorf("tear down containers: %w", err)
	}
	dir, dataRoot, runcRoot := cfg.layout()
	var out []string
	var errs []error
	ents, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, fmt.Errorf("tear down containers: %w", err))
	}
	var shims []int
	for _, e := range ents {
		d := filepath.Join(dir, e.Name())
		b, err := os.ReadFile(filepath.Join(d, shimPidFile))
		if err != nil {
			continue
		}
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && shimAlive(pid, d) {
			shims = append(shims, pid)
		}
	}
	shims = append(shims, warmShims(dir)...)
	for _, pid := range waitGone(ctx, shims, shimExitWait) {
		if err := syscall.Kill(pid, syscall.SIGKILL); err == nil {
			out = append(out, fmt.Sprintf("killed shim %d", pid))
		}
	}
	waitGone(ctx, shims, shimExitWait)
	mounts := mountsBelow(stateDir)
	if cfg.RunDir != "" && !within(cfg.RunDir, stateDir) {
		mounts = append(mountsBelow(cfg.RunDir), mounts...)
	}
	for _, m := range mounts {
		if err := unix.Unmount(m, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", m, err))
			continue
		}
		out = append(out, "removed mount "+m)
	}
	for _, e := range ents {
		if err := removeContainerDir(filepath.Join(dir, e.Name())); err != nil {
			errs = append(errs, fmt.Errorf("remove container %s: %w", e.Name(), err))
			continue
		}
		if strings.HasPrefix(e.Name(), SandboxPrefix) {
			out = append(out, fmt.Sprintf("removed warm sandbox %s (made ahead of launches, never used)", e.Name()))
			continue
		}
		out = append(out, fmt.Sprintf("removed container %s (bundle, sandbox, output, shim state)", e.Name()))
	}
	if dataRoot != dir {
		lines, err := removeEach(dataRoot, "the sandbox and output of ")
		out, errs = append(out, lines...), append(errs, err)
		// Emptied data directories kept for launches (dataSpares).
		if err := os.RemoveAll(dataRoot + spareSuffix); err != nil {
			errs = append(errs, fmt.Errorf("tear down containers: %w", err))
		}
	}
	lines, err := removeEach(runcRoot, "runc state of ")
	out, errs = append(out, lines...), append(errs, err)
	for _, d := range []string{dir, dataRoot, runcRoot} {
		if err := os.Remove(d); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("tear down containers: %w", err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return out, err
	}
	return out, nil
}

// removeEach removes every entry of root (a missing root has none),
// saying "removed "+what+name of each.
func removeEach(root, what string) ([]string, error) {
	ents, err := os.ReadDir(root)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("tear down containers: %w", err)
	}
	var out []string
	var errs []error
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(root, e.Name())); err != nil {
			errs = append(errs, fmt.Errorf("remove %s%s: %w", what, e.Name(), err))
			continue
		}
		out = append(out, "removed "+what+e.Name())
	}
	return out, errors.Join(errs...)
}

// warmShims are the shims waiting for a container in dir (started ahead
// of launches, they sit in the containers' directory until told theirs).
func warmShims(dir string) []int {
	procs, _ := filepath.Glob("/proc/[0-9]*")
	var out []int
	for _, p := range procs {
		pid, err := strconv.Atoi(filepath.Base(p))
		if err != nil || pid == os.Getpid() {
			continue
		}
		if cwd, _ := os.Readlink(filepath.Join(p, "cwd")); cwd == dir && shimAlive(pid, dir) {
			out = append(out, pid)
		}
	}
	return out
}

// waitGone waits up to d for pids to be gone (or zombies) and returns
// those still alive.
func waitGone(ctx context.Context, pids []int, d time.Duration) []int {
	deadline := time.Now().Add(d)
	for {
		alive := slices.DeleteFunc(slices.Clone(pids), func(pid int) bool { return !running(pid) })
		if len(alive) == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			return alive
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// mountsBelow lists the mount points below dir in this process's mount
// namespace, deepest first.
func mountsBelow(dir string) []string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			out = append([]string{f[4]}, out...)
		}
	}
	return out
}
