package executor

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
)

// A recycled shim (RunOptions.Recycle) runs another container after its
// container ends, instead of exiting; the containerizer puts it back
// among its warm shims. What makes that safe is that the shim is, before
// each container, what a new warm shim is: leave takes the ended
// container's mounts out of the shim's mount namespace, and detach moves
// the shim out of its directory; recycler checks what leave cannot see
// (file descriptors and goroutines left over) against the shim's own
// counts after its first container. A shim that fails any of it exits,
// as every shim did before.
//
// What a recycled shim keeps from one container to the next is its
// process: the Go runtime, the codecs prewarm built, and its mount
// namespace, a copy of the agent's that followed the host's until the
// first launch made it private: host mounts made or removed since are
// not seen there (maxRecycleAge bounds that; the containerizer gives
// launches that join a network namespace a shim that has run nothing).

const (
	// maxRecycleUses bounds the containers one shim runs.
	maxRecycleUses = 200
	// maxRecycleAge bounds how long after its first container's launch
	// a shim takes another container: its mount namespace stopped
	// following the host's then.
	maxRecycleAge = time.Minute
)

// recycler decides whether a warm shim takes another container.
type recycler struct {
	on    bool
	first time.Time // the first container's launch
	uses  int
	// fds and goroutines are the counts after the first container: what
	// the process keeps once (the poller, libcontainer's procfs handle,
	// the log's goroutines of the runtime) is there by then; a shim that
	// holds more after a later one leaks, and exits.
	fds, goroutines int
}

func newRecycler(on bool) *recycler {
	return &recycler{on: on}
}

// again reports whether the container about to run may be followed by
// another in this shim.
func (r *recycler) again() bool {
	if !r.on {
		return false
	}
	r.uses++
	if r.uses == 1 {
		r.first = time.Now()
	}
	return r.uses < maxRecycleUses
}

// reset returns why the shim, its container gone and its directory
// left, may not take another (nil: it may): its first container must
// have launched less than maxRecycleAge ago, and it must hold no more
// than after that container: no file descriptor and no goroutine more
// (goroutines that are ending get a moment). held is the descriptors
// the shim holds for its next container (readySet), not counted.
func (r *recycler) reset(held int) error {
	if age := time.Since(r.first); age >= maxRecycleAge {
		return fmt.Errorf("its mount namespace is as old as its first container (%s)", age.Round(time.Second))
	}
	fds := openFDs()
	if fds < 0 {
		return errors.New("its open file descriptors cannot be counted")
	}
	fds -= held
	if r.uses == 1 {
		time.Sleep(5 * time.Millisecond) // the container's goroutines end
		n := openFDs()
		if n < 0 {
			return errors.New("its open file descriptors cannot be counted")
		}
		r.fds, r.goroutines = n-held, runtime.NumGoroutine()
		return nil
	}
	if fds > r.fds {
		return fmt.Errorf("file descriptors left open: %d, %d after its first container", fds, r.fds)
	}
	deadline := time.Now().Add(100 * time.Millisecond)
	for runtime.NumGoroutine() > r.goroutines {
		if time.Now().After(deadline) {
			return fmt.Errorf("goroutines left: %d, %d after its first container", runtime.NumGoroutine(), r.goroutines)
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}

// openFDs counts the process's open file descriptors (-1 when unknown).
func openFDs() int {
	f, err := os.Open("/proc/self/fd")
	if err != nil {
		return -1
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return -1
	}
	return len(names) - 1 // the directory's own
}

// leave readies the shim for another container once s's has ended
// (supervise returned): every control connection ended, and the mounts
// the launch made under the container's directory (root, sysfs, cgroup
// view) detached, none left there. It returns why the shim may not take
// another container (nil: it may; recycler.reset checks the rest, then
// detach).
func (s *shim) leave() error {
	if !s.served {
		return errors.New("a control connection outlived the container")
	}
	for _, mp := range []string{RootfsDir, SysfsDir, CgroupViewDir} {
		p := filepath.Join(s.dir, mp)
		if err := unix.Unmount(p, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("unmount %s: %w", p, err)
		}
	}
	if left, err := mountsUnder(s.dir); err != nil || len(left) > 0 {
		return fmt.Errorf("mounts left in the container directory: %q (%v)", left, err)
	}
	return nil
}

// detach leaves the container directory dir: the shim's output, which
// went to its shim.log (adoptDir), goes nowhere until the next
// container, and the working directory is dir's parent, where warm shims
// wait (brim agent cleanup finds them there). Last: the containerizer
// takes a shim whose working directory is no longer the container's as
// gone from it (shimAlive).
func detach(dir string) error {
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer null.Close()
	for _, fd := range []int{1, 2} {
		if err := unix.Dup3(int(null.Fd()), fd, 0); err != nil {
			return err
		}
	}
	return os.Chdir(filepath.Dir(dir))
}

// mountsUnder returns the mount points of the shim's mount namespace at
// or below dir.
func mountsUnder(dir string) ([]string, error) {
	ms, err := mountinfo.GetMounts(mountinfo.PrefixFilter(dir))
	if err != nil {
		return nil, fmt.Errorf("read mountinfo: %w", err)
	}
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Mountpoint
	}
	return out, nil
}
