package containerizer

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/brimnode/brim/executor"
	"github.com/brimnode/brim/isolator"
)

// pidLister is an optional ability of an isolator (isolator/cgroups): the
// processes in the container's cgroup and the groups below it.
type pidLister interface {
	PIDs(ctx context.Context, id string) ([]int, error)
}

// thawer is an optional ability of an isolator (isolator/cgroups): resume a
// frozen container, whose processes cannot die of SIGKILL until thawed.
type thawer interface {
	Thaw(ctx context.Context, id string) error
}

// cgroupKillWait bounds how long escalate keeps killing the processes of a
// container's cgroup until none is left.
const cgroupKillWait = 5 * time.Second

// escalate ends a container whose shim does not answer (cause): it kills
// the shim (SIGKILL reaches a stopped process too), then every process in
// the container's cgroup, destroys libcontainer's state and records the
// exit with ReasonShimUnresponsive. It touches only this container's shim
// (checked by its command line and directory) and cgroup, and returns
// within a few seconds whatever the shim does.
func (c *Containerizer) escalate(ctx context.Context, ct *container, cause error) (*ExitStatus, error) {
	ct.escMu.Lock()
	defer ct.escMu.Unlock()
	if st := ct.exitStatus(); st != nil {
		c.release(ctx, ct)
		return st, nil
	}
	id := ct.spec.ID
	ctx = context.WithoutCancel(ctx) // half an escalation helps nobody
	c.log.Warn("shim unresponsive: killing the shim and the container", "id", id, "shim_pid", ct.shimPid, "err", cause)
	if shimAlive(ct.shimPid, ct.dir) {
		if err := syscall.Kill(ct.shimPid, syscall.SIGKILL); err != nil {
			c.log.Warn("kill unresponsive shim", "id", id, "shim_pid", ct.shimPid, "err", err)
		}
		waitShim(ctx, ct, cgroupKillWait)
	}
	var errs []error
	if err := c.killCgroup(ctx, id); err != nil {
		errs = append(errs, err)
	}
	if err := c.destroyRuncState(ct.runtimeID()); err != nil {
		errs = append(errs, err)
	}
	st := &ExitStatus{
		Code:       128 + int(syscall.SIGKILL),
		Signal:     int(syscall.SIGKILL),
		Reason:     ReasonShimUnresponsive,
		Message:    fmt.Sprintf("the shim stopped answering (%v); the shim and the container were killed", cause),
		FinishedAt: time.Now(),
	}
	if err := executor.WriteExit(ct.dir, st); err != nil {
		errs = append(errs, err)
	}
	ct.setExit(st)
	c.release(ctx, ct)
	if err := errors.Join(errs...); err != nil {
		c.log.Warn("escalate unresponsive shim", "id", id, "err", err)
	}
	c.log.Info("container killed: shim unresponsive", "id", id)
	return st, nil
}

// killCgroup SIGKILLs every process in the container's cgroup, through the
// isolator that lists them, until none is left or cgroupKillWait passes. A
// frozen container is thawed first. No isolator that lists processes is
// not an error (destroyRuncState still kills the init, and with it the
// container's pid namespace).
func (c *Containerizer) killCgroup(ctx context.Context, id string) error {
	for _, iso := range c.cfg.Isolators {
		if t, ok := iso.(thawer); ok {
			_ = t.Thaw(ctx, id) // not frozen, or no freezer: nothing to do
		}
	}
	for _, iso := range c.cfg.Isolators {
		pl, ok := iso.(pidLister)
		if !ok {
			continue
		}
		deadline := time.Now().Add(cgroupKillWait)
		for {
			pids, err := pl.PIDs(ctx, id)
			if errors.Is(err, isolator.ErrNotFound) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("kill processes of %s: %w", id, err)
			}
			if len(pids) == 0 {
				return nil
			}
			for _, pid := range pids {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("kill processes of %s: %d left after %v", id, len(pids), cgroupKillWait)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return nil
}
