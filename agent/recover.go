package agent

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Recover reconciles the checkpoint with what the runtime finds: containers
// the runtime still has are adopted (running ones are watched again, exited
// ones get their exit status); checkpointed containers that vanished are
// marked exited with reason "lost"; a launch the agent never finished is
// adopted if its container runs, else dropped with whatever the runtime
// made of it (nobody was given its ID); containers the runtime has but the
// checkpoint does not are orphans and are destroyed. A record that cannot
// be read is quarantined (see quarantineLocked), not fatal: the others are
// recovered. Call it once, before serving.
//
// Recovery needs no space on the state dir's disk: only the records whose
// state changed are written, and one that cannot be written (a full disk)
// is kept in memory and written when it can be (see saveLocked); the
// containers are adopted all the same.
func (a *Agent) Recover(ctx context.Context) error {
	if free := freeBytes(a.opts.StateDir); free >= 0 && free < minFreeBytes {
		a.log.Error("state dir full: recovering without writing; new launches fail until space is freed",
			"state_dir", a.opts.StateDir, "free_bytes", free)
	}
	records, bad, err := a.store.load()
	if err != nil {
		return fmt.Errorf("recover: %w", err)
	}
	infos, err := a.rt.Recover(ctx)
	if err != nil {
		return fmt.Errorf("recover runtime: %w", err)
	}
	p := planRecovery(records, bad, infos, time.Now())
	return a.applyRecovery(ctx, p)
}

// recoveryPlan is what Recover does, decided from the checkpoint and the
// runtime alone (planRecovery, pure); applyRecovery carries it out.
type recoveryPlan struct {
	// adopt are the records to enter, their state reconciled; changed
	// names those whose record differs from the one on disk.
	adopt   []*Container
	changed map[string]bool
	// drop are interrupted launches: their records are removed, and
	// their containers (ended) destroyed when the runtime has them.
	drop []droppedLaunch
	// quarantine are unreadable records, with what the runtime has under
	// their IDs (nil: nothing).
	quarantine []quarantinedRecord
	// orphans are the runtime's containers no record names.
	orphans []*RuntimeInfo
}

type droppedLaunch struct {
	c  *Container
	in *RuntimeInfo // nil: the runtime has nothing under the ID
}

type quarantinedRecord struct {
	q  Quarantined
	in *RuntimeInfo
}

// planRecovery reconciles each record with the runtime's container of
// its ID (see Recover). It changes the records it is given.
func planRecovery(records []*Container, bad []Quarantined, infos []*RuntimeInfo, now time.Time) recoveryPlan {
	found := make(map[string]*RuntimeInfo, len(infos))
	for _, in := range infos {
		found[in.ID] = in
	}
	p := recoveryPlan{changed: map[string]bool{}}
	for _, c := range records {
		in, ok := found[c.ID]
		delete(found, c.ID)
		if c.State == StateLaunching && c.Exit != nil && (!ok || !in.Running) {
			// A restart the agent did not finish (see relaunch): the
			// container stays exited, its sandbox and log where the
			// record says; its ID was given out, so it is kept.
			c.State = StateExited
			c.Exit = &ExitStatus{Code: -1, Reason: ReasonRestartFailed, Message: "restart interrupted by the agent's stop", FinishedAt: now}
			p.changed[c.ID] = true
			p.adopt = append(p.adopt, c)
			continue
		}
		if c.State == StateLaunching && (!ok || !in.Running) {
			p.drop = append(p.drop, droppedLaunch{c: c, in: in})
			continue
		}
		if reconcile(c, in, now) {
			p.changed[c.ID] = true
		}
		p.adopt = append(p.adopt, c)
	}
	for _, q := range bad {
		p.quarantine = append(p.quarantine, quarantinedRecord{q: q, in: found[q.ID]})
		delete(found, q.ID) // a quarantined record's container is no orphan
	}
	for _, in := range found {
		p.orphans = append(p.orphans, in)
	}
	return p
}

// reconcile brings record c in line with the runtime's container in (nil:
// none) and reports whether c changed.
func reconcile(c *Container, in *RuntimeInfo, now time.Time) bool {
	before := *c
	if in != nil && in.LogDir != "" {
		c.LogDir = in.LogDir
	}
	if in != nil && in.CgroupPath != "" {
		c.CgroupPath = in.CgroupPath
	}
	switch {
	case in != nil && in.Running:
		c.State, c.Pid, c.Exit = StateRunning, in.Pid, nil // (a restart's record kept the last exit)
		if !in.StartedAt.IsZero() {
			c.StartedAt = in.StartedAt
		}
		if in.SandboxDir != "" {
			c.SandboxDir = in.SandboxDir
		}
	case in != nil:
		if c.State != StateExited || c.Exit == nil {
			c.State, c.Exit = StateExited, in.Exit
			if c.Exit == nil {
				c.Exit = &ExitStatus{Code: -1, Reason: ReasonLost, Message: "exit status unknown", FinishedAt: now}
			}
		}
		if in.SandboxDir != "" {
			c.SandboxDir = in.SandboxDir
		}
	case c.State == StateRunning:
		c.State = StateExited
		c.Exit = &ExitStatus{Code: -1, Reason: ReasonLost, Message: "container vanished while the agent was down", FinishedAt: now}
	}
	return c.State != before.State || c.Pid != before.Pid || !c.StartedAt.Equal(before.StartedAt) ||
		c.SandboxDir != before.SandboxDir || c.LogDir != before.LogDir || c.Exit != before.Exit ||
		c.CgroupPath != before.CgroupPath
}

// applyRecovery enters the plan's containers, watches the running ones,
// and removes what the plan drops: interrupted launches and orphans.
func (a *Agent) applyRecovery(ctx context.Context, p recoveryPlan) error {
	now := time.Now()
	var watch []string
	a.mu.Lock()
	for _, c := range p.adopt {
		a.addLocked(c)
		if p.changed[c.ID] {
			a.saveLocked(c)
		}
		if c.State == StateRunning {
			watch = append(watch, c.ID)
		}
		a.log.Info("recovered container", "id", c.ID, "name", c.Name, "state", c.State)
	}
	for _, d := range p.drop {
		a.dropLaunchLocked(d)
	}
	for _, q := range p.quarantine {
		if a.quarantineLocked(q.q, q.in, now) {
			watch = append(watch, q.q.ID)
		}
	}
	a.mu.Unlock()
	for _, id := range watch {
		a.watch(id)
	}
	var errs []error
	for _, d := range p.drop {
		if d.in == nil {
			continue
		}
		if err := a.rt.Destroy(ctx, d.c.ID); err != nil && !errors.Is(err, ErrNotFound) {
			errs = append(errs, fmt.Errorf("destroy interrupted launch %s: %w", d.c.ID, err))
		}
	}
	for _, in := range p.orphans {
		if err := a.destroyOrphan(ctx, in); err != nil {
			errs = append(errs, err)
		}
	}
	a.collect(ctx)
	return errors.Join(errs...)
}

// dropLaunchLocked removes the record of a launch that never completed
// and whose container does not run: nobody was given its ID. If its
// container ended already (e.g. the shim was lost with the agent), it is
// dropped with its record, not reported as an exit nobody can ask about.
// A record that cannot be removed stays for the next start to drop.
func (a *Agent) dropLaunchLocked(d droppedLaunch) {
	c := d.c
	if d.in != nil {
		a.log.Warn("dropping interrupted launch: its container ended while the agent was down", "id", c.ID, "name", c.Name, "exit", d.in.Exit)
	} else {
		a.log.Info("dropping interrupted launch", "id", c.ID, "name", c.Name)
	}
	if err := a.store.delete(c.ID); err != nil {
		a.log.Error("remove the record of an interrupted launch: the next start drops it", "id", c.ID, "err", err)
	}
}

// destroyOrphan kills and destroys a container no record names.
func (a *Agent) destroyOrphan(ctx context.Context, in *RuntimeInfo) error {
	a.log.Warn("destroying orphan container", "id", in.ID, "running", in.Running)
	if in.Running {
		if err := a.rt.Kill(ctx, in.ID, 0); err != nil && !errors.Is(err, ErrNotRunning) && !errors.Is(err, ErrNotFound) {
			return fmt.Errorf("kill orphan %s: %w", in.ID, err)
		}
	}
	if err := a.rt.Destroy(ctx, in.ID); err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("destroy orphan %s: %w", in.ID, err)
	}
	return nil
}
