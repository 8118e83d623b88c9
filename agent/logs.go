package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// Log streams.
const (
	Stdout = 1
	Stderr = 2
)

// logPoll is how often a followed log is checked for new output.
const logPoll = 100 * time.Millisecond

// Logs sends the container's stdout and stderr to emit, in chunks. With
// follow it keeps sending until the container has exited and its output is
// drained (or ctx ends). Errors wrap ErrNotFound.
func (a *Agent) Logs(ctx context.Context, ref string, follow bool, emit func(stream int, data []byte) error) error {
	a.mu.Lock()
	c, err := a.resolveLocked(ref)
	if err != nil {
		a.mu.Unlock()
		return err
	}
	id, dir, done := c.ID, c.SandboxDir, a.done[c.ID]
	a.mu.Unlock()
	if dir == "" {
		return fmt.Errorf("logs %s: no sandbox", id)
	}
	files := [2]*os.File{}
	for i, name := range []string{"stdout", "stderr"} {
		f, err := openLog(filepath.Join(dir, name))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("logs %s: %w", id, err)
		}
		if f != nil {
			defer f.Close()
		}
		files[i] = f
	}
	buf := make([]byte, 32<<10)
	drain := func() error {
		for i, f := range files {
			if f == nil {
				continue
			}
			for {
				n, err := f.Read(buf)
				if n > 0 {
					if err := emit(i+1, buf[:n]); err != nil {
						return err
					}
				}
				if err == io.EOF || n == 0 {
					break
				}
				if err != nil {
					return fmt.Errorf("logs %s: %w", id, err)
				}
			}
		}
		return nil
	}
	if !follow {
		return drain()
	}
	t := time.NewTicker(logPoll)
	defer t.Stop()
	for {
		if err := drain(); err != nil {
			return err
		}
		select {
		case <-done:
			return drain()
		case <-ctx.Done():
			return ctx.Err()
		case <-a.ctx.Done():
			return fmt.Errorf("logs %s: agent is shutting down", id)
		case <-t.C:
		}
	}
}

// openLog opens a container's stdout or stderr. The sandbox belongs to the
// task's user, who may have replaced the file: a symlink (to a host file
// the agent could read as root) is refused, and so is anything but a
// regular file (a FIFO would block the agent).
func openLog(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|logOpenFlags, 0)
	if err != nil {
		return nil, err
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("open %s: not a regular file", filepath.Base(path))
	}
	return f, nil
}
