package containerizer

import (
	"fmt"
	"os"

	"github.com/opencontainers/runc/libcontainer/exeseal"
	"golang.org/x/sys/unix"
)

// cloneShimBinary copies the shim binary once into a sealed memfd that
// every shim is executed from. libcontainer protects the host binary from
// a container overwriting it (CVE-2019-5736) by sealing a copy of
// /proc/self/exe before each container start — an overlayfs mount, or a
// full copy of the binary when overlayfs refuses (e.g. the binary's
// directory overlaps the state dir): ~20 ms for brim's size. A shim whose
// own executable is already a sealed memfd skips that step, so paying for
// the copy once per containerizer takes it off every launch. The memfd
// (the binary's size, in shared memory) lives until Close.
func cloneShimBinary(path, tmpDir string) (*os.File, error) {
	src, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("clone shim binary: %w", err)
	}
	defer src.Close()
	fi, err := src.Stat()
	if err != nil {
		return nil, fmt.Errorf("clone shim binary: %w", err)
	}
	clone, err := exeseal.CloneBinary(src, fi.Size(), path, tmpDir)
	if err != nil {
		return nil, fmt.Errorf("clone shim binary: %w", err)
	}
	defer clone.Close()
	// Keep it clear of the low fds os/exec dup2s ExtraFiles onto in the
	// child: the child execs /proc/self/fd/<n> after those dups.
	fd, err := unix.FcntlInt(clone.Fd(), unix.F_DUPFD_CLOEXEC, 100)
	if err != nil {
		return nil, fmt.Errorf("clone shim binary: %w", err)
	}
	return os.NewFile(uintptr(fd), "brim-shim-sealed"), nil
}

// shimCommand returns the executable path and argv[0] for a shim.
func (c *Containerizer) shimCommand() (path, argv0 string) {
	if c.shimExe != nil {
		return fmt.Sprintf("/proc/self/fd/%d", c.shimExe.Fd()), c.cfg.ShimBinary
	}
	return c.cfg.ShimBinary, c.cfg.ShimBinary
}
