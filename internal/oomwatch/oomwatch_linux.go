package oomwatch

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// V1 registers an eventfd for OOM notification of the v1 memory group dir
// (memory.oom_control through cgroup.event_control) and sends one value on
// the returned channel (buffered 1: events that arrive before the last one
// is received are merged) each time the kernel starts an OOM in the group —
// before the kill, so memory.oom_control oom_kill may still read 0. The
// channel is closed when ctx ends or the group is removed (the kernel
// signals the eventfd then too); a goroutine owned by ctx watches until
// then. Errors wrap fs.ErrNotExist for a group that is not there.
func V1(ctx context.Context, dir string) (<-chan struct{}, error) {
	oom, err := os.Open(filepath.Join(dir, "memory.oom_control"))
	if err != nil {
		return nil, err
	}
	defer oom.Close() // the registration holds its own reference
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	ev := os.NewFile(uintptr(efd), "oom-eventfd") // non-blocking: reads use the poller, Close unblocks them
	reg := strconv.Itoa(efd) + " " + strconv.Itoa(int(oom.Fd()))
	if err := os.WriteFile(filepath.Join(dir, "cgroup.event_control"), []byte(reg), 0); err != nil {
		ev.Close()
		return nil, fmt.Errorf("register oom event: %w", err)
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
				return // group removed
			}
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}()
	return ch, nil
}
