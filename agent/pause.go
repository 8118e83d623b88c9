package agent

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ContainerCgroups is what the agent does to a running container's cgroups
// besides its limits: list its processes (Top), freeze and thaw it (Pause,
// Unpause, and the thaw of a kill). *cgroups.Isolator implements it.
type ContainerCgroups interface {
	PIDs(ctx context.Context, id string) ([]int, error)
	Freeze(ctx context.Context, id string) error
	Thaw(ctx context.Context, id string) error
}

// pauseWait bounds how long Pause waits for the kernel to report the
// container frozen. A task in an uninterruptible sleep (a write to a hung
// disk) stops only as it leaves it; the freeze goes on in the kernel, and
// the container counts as paused.
const pauseWait = 5 * time.Second

// Pause freezes every process of a running container (v1 freezer, v2
// cgroup.freeze) until Unpause; the mark is checkpointed, so the
// container stays paused across an agent restart. A user's pause wins
// over the QoS controller, whose thaws leave it frozen; a kill thaws it
// first. Errors wrap ErrNotFound, ErrNotRunning (exited, or a kill of it
// has begun), ErrPaused, ErrInvalidArgument (a quarantined record) or
// ErrNotSupported (no freezer).
func (a *Agent) Pause(ctx context.Context, ref string) (*Container, error) {
	if a.opts.Cgroups == nil {
		return nil, fmt.Errorf("pause: %w: the agent has no cgroup freezer", ErrNotSupported)
	}
	a.freezeMu.Lock()
	defer a.freezeMu.Unlock()
	c, err := a.pausable("pause", ref, func(c *Container) error {
		switch {
		case a.killing[c.ID]:
			return fmt.Errorf("%w: it is being killed", ErrNotRunning)
		case c.Paused:
			return ErrPaused
		case c.Quarantine != "":
			return fmt.Errorf("%w: its checkpoint record is quarantined (%s)", ErrInvalidArgument, c.Quarantine)
		}
		c.Paused = true // before the freeze: a QoS thaw meanwhile leaves it alone
		return nil
	})
	if err != nil {
		return nil, err
	}
	id := c.ID

	fctx, cancel := context.WithTimeout(ctx, pauseWait)
	err = a.opts.Cgroups.Freeze(fctx, id)
	cancel()
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		a.log.Info("pause under way: tasks in an uninterruptible sleep stop as they leave it", "id", id, "waited", pauseWait)
		err = nil
	}
	if err != nil {
		if terr := a.opts.Cgroups.Thaw(context.WithoutCancel(ctx), id); terr != nil {
			a.log.Warn("thaw after a failed pause", "id", id, "err", terr)
		}
		a.mu.Lock()
		c.Paused = false
		a.mu.Unlock()
		return nil, fmt.Errorf("pause %s: %w", id, err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.saveLocked(c)
	a.log.Info("paused container", "id", id, "name", c.Name)
	return c.clone(), nil
}

// Unpause lifts a user's Pause and thaws the container, unless a QoS
// freeze of it is in force: it then stays frozen until the controller
// thaws it (QoSFrozen says so). Errors wrap ErrNotFound, ErrNotRunning,
// ErrNotPaused or ErrNotSupported.
func (a *Agent) Unpause(ctx context.Context, ref string) (*Container, error) {
	if a.opts.Cgroups == nil {
		return nil, fmt.Errorf("unpause: %w: the agent has no cgroup freezer", ErrNotSupported)
	}
	a.freezeMu.Lock()
	defer a.freezeMu.Unlock()
	c, err := a.pausable("unpause", ref, func(c *Container) error {
		if !c.Paused {
			return ErrNotPaused
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	id := c.ID
	if !a.QoSFrozen(id) {
		if err := a.opts.Cgroups.Thaw(ctx, id); err != nil {
			return nil, fmt.Errorf("unpause %s: %w", id, err)
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	c.Paused = false
	a.saveLocked(c)
	a.log.Info("unpaused container", "id", id, "name", c.Name, "qos_frozen", a.QoSFrozen(id))
	return c.clone(), nil
}

// pausable finds running container ref for a pause or an unpause (verb)
// and runs check on it under a.mu: its error refuses the call.
func (a *Agent) pausable(verb, ref string, check func(*Container) error) (*Container, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	c, err := a.resolveLocked(ref)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", verb, err)
	}
	if c.State != StateRunning {
		return nil, fmt.Errorf("%s %s: %w", verb, c.ID, ErrNotRunning)
	}
	if err := check(c); err != nil {
		return nil, fmt.Errorf("%s %s: %w", verb, c.ID, err)
	}
	return c, nil
}

// QoSFrozen reports whether a QoS correction keeps container id frozen.
func (a *Agent) QoSFrozen(id string) bool { return a.over != nil && a.over.frozen(id) }

// paused reports whether a user paused container id.
func (a *Agent) paused(id string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	c := a.containers[id]
	return c != nil && c.Paused
}

// beginKillLocked marks id as being killed, so that no pause freezes it
// again, and clears its pause: it reports whether the kill must thaw it
// (a frozen process cannot die). The caller holds freezeMu and a.mu.
func (a *Agent) beginKillLocked(c *Container) (thaw bool) {
	a.killing[c.ID] = true
	thaw, c.Paused = c.Paused, false
	return thaw
}

// thawForKill thaws a paused container about to be killed, first taking
// freezeMu so that a pause under way has finished. A failure is logged:
// the kill goes on (its escalation thaws through the cgroup too).
func (a *Agent) thawForKill(ctx context.Context, id string) {
	a.freezeMu.Lock()
	a.mu.Lock()
	thaw := false
	if c := a.containers[id]; c != nil {
		thaw = a.beginKillLocked(c)
		if thaw {
			a.saveLocked(c)
		}
	}
	a.mu.Unlock()
	if thaw && a.opts.Cgroups != nil {
		if err := a.opts.Cgroups.Thaw(ctx, id); err != nil {
			a.log.Warn("thaw paused container before its kill", "id", id, "err", err)
		}
	}
	a.freezeMu.Unlock()
}
