package cgroups

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/brimnode/brim/internal/oomwatch"
	"github.com/brimnode/brim/isolator"
)

// OOMEvents reports the container's OOM events: one value on the returned
// channel (buffered 1: events that arrive before the last one is received
// are merged) each time the kernel starts an OOM in the group — before the
// kill, so memory.oom_control oom_kill may still read 0 (see Usage). The
// channel is closed when ctx ends or the group is removed; a goroutine owned
// by ctx watches until then. v1 uses an eventfd on memory.oom_control, v2
// inotify on memory.events. Errors wrap isolator.ErrNotFound and
// isolator.ErrNotSupported (no memory controller).
func (i *Isolator) OOMEvents(ctx context.Context, id string) (<-chan struct{}, error) {
	if err := validID(id); err != nil {
		return nil, fmt.Errorf("watch oom of %s: %w", id, err)
	}
	if !i.Features().Memory {
		return nil, fmt.Errorf("watch oom of %s: memory controller: %w", id, isolator.ErrNotSupported)
	}
	d := i.dir("memory", i.Path(id))
	var ch <-chan struct{}
	var err error
	if i.version == V2 {
		ch, err = watchMemoryEvents(ctx, filepath.Join(d, "memory.events"))
	} else {
		ch, err = oomwatch.V1(ctx, d)
	}
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("watch oom of %s: %w: %w", id, isolator.ErrNotFound, err)
	}
	if err != nil {
		return nil, fmt.Errorf("watch oom of %s: %w", id, err)
	}
	return ch, nil
}

// memoryEventsGonePoll is how often a v2 OOM watch checks that its group
// still exists.
var memoryEventsGonePoll = time.Second

// watchMemoryEvents watches v2 memory.events with inotify and reports each
// rise of its "oom" counter; it ends when the file goes.
func watchMemoryEvents(ctx context.Context, file string) (<-chan struct{}, error) {
	ifd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("inotify: %w", err)
	}
	in := os.NewFile(uintptr(ifd), "oom-inotify")
	if _, err := unix.InotifyAddWatch(ifd, file, unix.IN_MODIFY|unix.IN_DELETE_SELF); err != nil {
		in.Close()
		return nil, fmt.Errorf("watch %s: %w", file, err)
	}
	readOOM := func() (uint64, error) {
		f, err := os.Open(file)
		if err != nil {
			return 0, err
		}
		defer f.Close()
		m, err := ParseKeyValues(f)
		return m["oom"], err
	}
	last, err := readOOM()
	if err != nil {
		in.Close()
		return nil, err
	}
	ch := make(chan struct{}, 1)
	stop := context.AfterFunc(ctx, func() { in.Close() })
	go func() {
		defer close(ch)
		defer func() {
			if stop() {
				in.Close()
			}
		}()
		buf := make([]byte, 4096)
		for {
			// kernfs sends no IN_DELETE_SELF when the group is removed
			// (seen on 6.1): look for the file between events.
			_ = in.SetReadDeadline(time.Now().Add(memoryEventsGonePoll))
			n, err := in.Read(buf)
			if errors.Is(err, os.ErrDeadlineExceeded) {
				if _, err := os.Stat(file); err != nil {
					return // group removed
				}
				continue
			}
			if err != nil {
				return // closed by ctx
			}
			for off := 0; off+unix.SizeofInotifyEvent <= n; {
				// struct inotify_event: wd, mask, cookie, len, name[len].
				mask := binary.NativeEndian.Uint32(buf[off+4:])
				if mask&(unix.IN_DELETE_SELF|unix.IN_IGNORED) != 0 {
					return // group (or file) removed
				}
				off += unix.SizeofInotifyEvent + int(binary.NativeEndian.Uint32(buf[off+12:]))
			}
			cur, err := readOOM()
			if err != nil {
				return
			}
			if cur > last {
				last = cur
				select {
				case ch <- struct{}{}:
				default:
				}
			}
		}
	}()
	return ch, nil
}
