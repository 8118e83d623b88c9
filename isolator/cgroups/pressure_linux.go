package cgroups

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/brimnode/brim/isolator"
)

// PSITrigger is the v2 PSI trigger WatchParentMemory registers: some task
// of the parent's subtree stalled on memory for 100 ms within a 1 s
// window.
const PSITrigger = "some 100000 1000000"

// WatchParentMemory reports memory pressure in the containers' parent as
// the kernel sees it, so that a guard can look at once rather than at its
// next tick: one value on the returned channel (buffered 1; events that
// arrive before the last one is received are merged) per notification. v1
// registers an eventfd on memory.pressure_level at level "medium"
// (reclaim fails for most of what it scans, in the parent or any group
// below it); v2 a PSI trigger (PSITrigger) on memory.pressure. The channel
// is closed when ctx ends or the parent goes; a goroutine owned by ctx
// watches until then (on v2 it notices ctx within a second). Errors wrap
// isolator.ErrNotSupported (no memory controller, a kernel without PSI
// triggers or pressure levels).
func (i *Isolator) WatchParentMemory(ctx context.Context) (<-chan struct{}, error) {
	if err := i.setup(); err != nil {
		return nil, fmt.Errorf("watch parent memory: %w", err)
	}
	if !i.Features().Memory {
		return nil, fmt.Errorf("watch parent memory: memory controller: %w", isolator.ErrNotSupported)
	}
	d := i.dir("memory", i.parent)
	var ch <-chan struct{}
	var err error
	if i.version == V2 {
		ch, err = watchPSI(ctx, filepath.Join(d, "memory.pressure"), PSITrigger)
	} else {
		ch, err = watchPressureLevel(ctx, d, "medium")
	}
	if err != nil {
		return nil, fmt.Errorf("watch parent memory: %w", err)
	}
	return ch, nil
}

// watchPressureLevel registers an eventfd for v1 memory.pressure_level
// notifications at level in group dir.
func watchPressureLevel(ctx context.Context, dir, level string) (<-chan struct{}, error) {
	pl, err := os.Open(filepath.Join(dir, "memory.pressure_level"))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", isolator.ErrNotSupported, err)
	}
	defer pl.Close() // the registration holds its own reference
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	ev := os.NewFile(uintptr(efd), "pressure-eventfd") // non-blocking: Close unblocks a Read
	reg := strconv.Itoa(efd) + " " + strconv.Itoa(int(pl.Fd())) + " " + level
	if err := writeFile(filepath.Join(dir, "cgroup.event_control"), reg); err != nil {
		ev.Close()
		return nil, fmt.Errorf("register memory pressure event: %w", err)
	}
	ch := make(chan struct{}, 1)
	stop := context.AfterFunc(ctx, func() { ev.Close() })
	go func() {
		defer close(ch)
		defer func() {
			if stop() {
				ev.Close()
			}
		}()
		buf := make([]byte, 8)
		for {
			if _, err := ev.Read(buf); err != nil {
				return // closed by ctx
			}
			if binary.NativeEndian.Uint64(buf) == 0 {
				return
			}
			if _, err := os.Stat(dir); err != nil {
				return // group removed (the kernel signals the eventfd then)
			}
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}()
	return ch, nil
}

// psiPoll is how often a PSI watch wakes without an event to check its
// context.
var psiPoll = time.Second

// watchPSI registers trigger on a v2 pressure file and reports each
// POLLPRI.
func watchPSI(ctx context.Context, file, trigger string) (<-chan struct{}, error) {
	f, err := os.OpenFile(file, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", isolator.ErrNotSupported, err)
	}
	if _, err := f.WriteString(trigger); err != nil {
		f.Close()
		return nil, fmt.Errorf("register psi trigger %q on %s: %w: %w", trigger, file, isolator.ErrNotSupported, err)
	}
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	var fd int
	if err := rc.Control(func(v uintptr) { fd = int(v) }); err != nil {
		f.Close()
		return nil, err
	}
	ch := make(chan struct{}, 1)
	go func() {
		defer close(ch)
		defer f.Close() // also removes the trigger
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLPRI}}
		for ctx.Err() == nil {
			n, err := unix.Poll(fds, int(psiPoll/time.Millisecond))
			if errors.Is(err, unix.EINTR) || n == 0 {
				continue
			}
			if err != nil || fds[0].Revents&(unix.POLLERR|unix.POLLNVAL) != 0 {
				return // the group went
			}
			if fds[0].Revents&unix.POLLPRI != 0 {
				select {
				case ch <- struct{}{}:
				default:
				}
			}
		}
	}()
	return ch, nil
}
