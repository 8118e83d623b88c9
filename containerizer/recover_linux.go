package containerizer

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/brimnode/brim/executor"
	"github.com/brimnode/brim/isolator"
)

// Recover reattaches to the containers under the state dir after an agent
// restart: live shims are asked for their state, containers that exited
// meanwhile are reported with the status their shim recorded, containers
// whose shim died without recording one are killed and reported with
// reason "shim-lost", and orphans (directories of launches that never
// completed, warm sandboxes of an earlier agent, libcontainer state
// without a directory) are removed. Then
// every isolator's Recover runs with the containers kept (running or
// exited, until Destroy). It returns every known container.
func (c *Containerizer) Recover(ctx context.Context) ([]*Info, error) {
	entries, err := os.ReadDir(c.dir)
	if err != nil {
		return nil, fmt.Errorf("recover: %w", err)
	}
	// Containers are recovered side by side: a shim that does not answer
	// costs its own deadline and escalation, not everyone's.
	var (
		errs  []error
		errMu sync.Mutex
		wg    sync.WaitGroup
		sem   = make(chan struct{}, recoverParallel)
	)
	for _, e := range entries {
		if !e.IsDir() || !executor.ValidID(e.Name()) {
			continue
		}
		id := e.Name()
		c.mu.Lock()
		_, known := c.containers[id]
		c.mu.Unlock()
		if known || c.pool.owns(id) {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := c.recoverOne(ctx, id); err != nil {
				errMu.Lock()
				errs = append(errs, err)
				errMu.Unlock()
			}
		}()
	}
	wg.Wait()
	if err := c.removeOrphanRuncState(); err != nil {
		errs = append(errs, err)
	}
	if err := c.removeOrphanData(); err != nil {
		errs = append(errs, err)
	}
	if err := c.releaseOrphanSnapshots(); err != nil {
		errs = append(errs, err)
	}

	known := make(map[string]isolator.Limits)
	paths := make(map[string]string) // id → cgroup path, for cgroupAdopters
	c.mu.Lock()
	for id, ct := range c.containers {
		if ct != nil {
			ct.mu.Lock()
			known[id] = ct.spec.Limits
			ct.mu.Unlock()
			paths[id] = ct.cgroupPath
		}
	}
	c.mu.Unlock()
	for _, iso := range c.cfg.Isolators {
		a, ok := iso.(cgroupAdopter)
		for id, p := range paths {
			if ok && p != "" {
				if err := a.Adopt(id, p); err != nil {
					errs = append(errs, fmt.Errorf("recover %s: %w", iso.Name(), err))
				}
			}
		}
	}
	for _, iso := range c.cfg.Isolators {
		if err := iso.Recover(ctx, known); err != nil {
			errs = append(errs, fmt.Errorf("recover %s: %w", iso.Name(), err))
		}
	}
	infos, _ := c.List(ctx)
	if err := errors.Join(errs...); err != nil {
		return infos, fmt.Errorf("recover: %w", err)
	}
	return infos, nil
}

// cgroupAdopter is the cgroup isolator's ability to learn, after a
// restart, the group a container runs in (isolator/cgroups.Isolator.Adopt:
// a container made from a warm sandbox on cgroup v2 keeps the
// sandbox's).
type cgroupAdopter interface {
	Adopt(id, cgroupPath string) error
}

// recoverParallel is how many containers Recover handles at once.
const recoverParallel = 8

func (c *Containerizer) recoverOne(ctx context.Context, id string) error {
	ct := c.newContainer(id)
	dir := ct.dir
	ct.shimPid = readShimPid(dir)
	rec, err := readRecord(dir)
	if err == nil && rec.Spec.ID != id {
		err = fmt.Errorf("record is for %q", rec.Spec.ID)
	}
	if err != nil {
		// A launch that died before recording what it launched, or a
		// warm sandbox of an earlier agent (never claimed).
		ct.spec.ID = id
		if b, berr := executor.ReadBundle(dir); berr == nil && b.Warm {
			c.log.Info("removing a warm sandbox of an earlier agent", "sandbox", id)
		} else {
			c.log.Warn("removing orphan container", "id", id, "err", err)
		}
		if shimAlive(ct.shimPid, dir) {
			_ = syscall.Kill(ct.shimPid, syscall.SIGKILL)
		}
		if err := c.teardown(ctx, ct); err != nil {
			return fmt.Errorf("remove orphan %s: %w", id, err)
		}
		return nil
	}
	ct.spec = rec.Spec
	ct.sandbox = rec.Sandbox
	ct.cgroupPath = rec.CgroupPath
	ct.startedAt = rec.CreatedAt
	ct.address = rec.Address
	if st := ct.exitStatus(); st == nil {
		s, err := c.client(ct).State(ctx)
		if errors.Is(err, executor.ErrShimUnresponsive) && ctx.Err() == nil {
			// Once more before escalating: a loaded host, not a hung shim.
			c.log.Warn("shim does not answer: asking again", "id", id, "shim_pid", ct.shimPid, "err", err)
			s, err = c.client(ct).State(ctx)
		}
		switch {
		case err == nil:
			ct.pid, ct.shimPid, ct.startedAt = s.Pid, s.ShimPid, s.StartedAt
			if s.Exit != nil {
				ct.setExit(s.Exit)
			}
		case errors.Is(err, executor.ErrShimUnresponsive) && ctx.Err() == nil:
			if _, err := c.escalate(ctx, ct, err); err != nil {
				return fmt.Errorf("recover %s: %w", id, err)
			}
		case errors.Is(err, executor.ErrShimGone):
			if _, err := c.exitOfGoneShim(ctx, ct); err != nil {
				return fmt.Errorf("recover %s: %w", id, err)
			}
		default:
			return fmt.Errorf("recover %s: %w", id, err)
		}
	}
	// A container that exited while the agent was down gives back its
	// network now, not at Destroy.
	if st := ct.exitStatus(); st != nil {
		c.release(ctx, ct)
		c.log.Info("recovered exited container", "id", id, "code", st.Code, "reason", st.Reason)
	} else {
		c.log.Info("recovered running container", "id", id, "pid", ct.pid, "shim_pid", ct.shimPid)
	}
	c.mu.Lock()
	c.containers[id] = ct
	c.mu.Unlock()
	return nil
}

// markLost kills what is left of a container whose shim died without
// recording an exit status, and records one with ReasonShimLost.
func (c *Containerizer) markLost(ctx context.Context, ct *container) (*ExitStatus, error) {
	ct.escMu.Lock()
	defer ct.escMu.Unlock()
	if st := ct.exitStatus(); st != nil {
		c.release(ctx, ct)
		return st, nil
	}
	id := ct.spec.ID
	c.log.Warn("shim lost: killing what is left of the container", "id", id, "shim_pid", ct.shimPid)
	if err := c.destroyRuncState(ct.runtimeID()); err != nil {
		return nil, err
	}
	st := &ExitStatus{
		Code:       128 + int(syscall.SIGKILL),
		Signal:     int(syscall.SIGKILL),
		Reason:     ReasonShimLost,
		Message:    "the shim died without recording the exit status; the container was killed",
		FinishedAt: time.Now(),
	}
	if err := executor.WriteExit(ct.dir, st); err != nil {
		// A full state dir: the exit is known here and reported (the
		// agent checkpoints it); the next containerizer finds the shim
		// gone again and records the same.
		c.log.Warn("record the exit of a container whose shim was lost", "id", id, "err", err)
	}
	ct.setExit(st)
	c.release(ctx, ct)
	return st, nil
}

// removeOrphanRuncState destroys libcontainer containers that have no
// container directory (the agent died between their creation and ours):
// neither one of their name nor one made from a warm sandbox of their
// name.
func (c *Containerizer) removeOrphanRuncState() error {
	entries, err := os.ReadDir(c.runcRoot)
	if err != nil {
		return fmt.Errorf("read runc state: %w", err)
	}
	inUse := make(map[string]bool)
	c.mu.Lock()
	for _, ct := range c.containers {
		if ct != nil {
			inUse[ct.runtimeID()] = true
		}
	}
	c.mu.Unlock()
	var errs []error
	for _, e := range entries {
		id := e.Name()
		if _, err := os.Stat(filepath.Join(c.dir, id)); err == nil || inUse[id] || c.pool.owns(id) {
			continue
		}
		c.log.Warn("removing orphan runc container", "id", id)
		if err := c.destroyRuncState(id); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// removeOrphanData removes, with a RunDir, the data directories (sandbox
// and log) that have no runtime directory: a launch that died between
// making the one and the other, or every container of the boot before
// (a reboot empties a RunDir on tmpfs, and the containers ended with
// it; the agent reports them lost from its own checkpoints).
func (c *Containerizer) removeOrphanData() error {
	if c.dataRoot == c.dir {
		return nil
	}
	entries, err := os.ReadDir(c.dataRoot)
	if err != nil {
		return fmt.Errorf("read data dirs: %w", err)
	}
	var errs []error
	for _, e := range entries {
		id := e.Name()
		c.mu.Lock()
		_, known := c.containers[id]
		c.mu.Unlock()
		if _, err := os.Lstat(filepath.Join(c.dir, id)); err == nil || known || c.pool.owns(id) {
			continue
		}
		c.log.Warn("removing the sandbox and log of a container without runtime state (a launch cut short, or a reboot)", "id", id)
		if err := os.RemoveAll(filepath.Join(c.dataRoot, id)); err != nil {
			errs = append(errs, fmt.Errorf("remove orphan data dir %s: %w", id, err))
		}
	}
	return errors.Join(errs...)
}

func readShimPid(dir string) int {
	data, err := os.ReadFile(filepath.Join(dir, shimPidFile))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	return pid
}
