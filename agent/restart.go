package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// LabelTask is the label naming the master's task a container runs (set
// by agent/taskrunner).
const LabelTask = "brim.task"

// restartDir, in the state dir, holds a container's sandbox and log
// between a restart's stop and its new run, and keeps them when the new
// run fails.
const restartDir = "restart"

// heldDirs are a stopped container's sandbox and log directories, held
// for its next run; an empty field: none held.
type heldDirs struct{ sandbox, log string }

// held is where a restart of container id holds its directories.
func (a *Agent) held(id string) heldDirs {
	d := filepath.Join(a.opts.StateDir, restartDir, id)
	return heldDirs{sandbox: filepath.Join(d, "sandbox"), log: filepath.Join(d, "log")}
}

// Restart stops container ref if it runs — SIGTERM, grace (negative: the
// agent's default), SIGKILL, as Kill — and runs its spec again under the
// same ID and name, as Docker's restart does: a new process, pid, start
// time (and address, with networking), its resources admitted again, the
// sandbox (the files the task wrote there) and the log kept, the log going
// on where it ended. Restarts counts the runs. When the new run cannot
// start (its resources or a host port were taken meanwhile), the container
// stays exited with reason ReasonRestartFailed, its sandbox and log kept.
// A task's container is refused: its framework decides how its tasks run
// again. Errors wrap ErrNotFound, ErrTaskContainer, ErrRunning (a launch or
// restart of it is under way), ErrInvalidArgument,
// ErrInsufficientResources, ErrStillExiting, or the runtime's.
func (a *Agent) Restart(ctx context.Context, ref string, grace time.Duration) (*Container, error) {
	c, err := a.Get(ref)
	if err != nil {
		return nil, fmt.Errorf("restart: %w", err)
	}
	switch {
	case c.Labels[LabelTask] != "":
		return nil, fmt.Errorf("restart %s: %w %q: its framework runs its tasks again", c.ID, ErrTaskContainer, c.Labels[LabelTask])
	case c.Quarantine != "":
		return nil, fmt.Errorf("restart %s: %w: its checkpoint record is quarantined (%s)", c.ID, ErrInvalidArgument, c.Quarantine)
	case c.State == StateLaunching:
		return nil, fmt.Errorf("restart %s: %w: its launch or restart is under way", c.ID, ErrRunning)
	case c.State == StateRunning:
		if _, err := a.Kill(ctx, c.ID, grace); err != nil && !errors.Is(err, ErrNotRunning) {
			return nil, fmt.Errorf("restart %s: %w", c.ID, err)
		}
	}
	return a.relaunch(ctx, c.ID)
}

// spec is the Spec c was launched with, as its record keeps it: its
// image by ID, the image's defaults applied already.
func (c *Container) spec() Spec {
	l := c.Limits
	s := Spec{
		Name: c.Name, Command: c.Command, Env: c.Env, Cwd: c.Cwd, Rootfs: c.Rootfs, User: c.User, UserNS: c.UserNS,
		Resources: Resources{MilliCPUs: l.MilliCPUs, MemMiB: l.MemoryBytes >> 20, NetMbit: l.NetBandwidthMbit, DiskMiB: c.DiskMiB},
		Pids:      l.Pids, CPUMode: l.CPUMode(), Network: l.Network, Ports: l.Ports, Revocable: c.Revocable, Labels: c.Labels,
		LogMaxSize: c.LogMaxSize, LogMaxFiles: c.LogMaxFiles, ReadWrite: c.ReadWrite, Stdin: c.Stdin, Tty: c.Tty, rerun: true,
	}
	if s.Image = c.ImageID; s.Image == "" {
		s.Image = c.Image
	}
	return s
}

// relaunch runs exited container id again (Restart).
func (a *Agent) relaunch(ctx context.Context, id string) (*Container, error) {
	a.mu.Lock()
	c := a.containers[id]
	if c == nil {
		a.mu.Unlock()
		return nil, fmt.Errorf("restart %s: %w", id, &NotFoundError{Ref: id})
	}
	spec := c.spec()
	a.mu.Unlock()
	p, err := a.plan(ctx, spec)
	if err != nil {
		return nil, fmt.Errorf("restart %s: %w", id, err)
	}
	defer p.release() // the runtime's lease holds the image from Launch on

	a.mu.Lock()
	if a.containers[id] != c || c.State != StateExited {
		a.mu.Unlock()
		return nil, fmt.Errorf("restart %s: %w: it was removed or started again meanwhile", id, ErrRunning)
	}
	if err := a.reserveLocked(id, poolOf(c), p.spec.Resources); err != nil {
		a.mu.Unlock()
		return nil, fmt.Errorf("restart %s: %w", id, err)
	}
	// Launching with its exit kept: a recovery tells an interrupted
	// restart from an interrupted launch by it.
	c.State = StateLaunching
	if err := a.store.put(c); err != nil {
		a.noteSaveLocked(err)
		c.State = StateExited
		a.settleLocked(id, false)
		a.mu.Unlock()
		return nil, fmt.Errorf("restart %s: %w", id, err)
	}
	a.done[id] = make(chan struct{})
	prev := heldDirs{sandbox: c.SandboxDir, log: c.LogDir}
	a.mu.Unlock()

	held := a.hold(id, prev)
	a.mu.Lock()
	if held.sandbox != "" {
		c.SandboxDir = held.sandbox // where a recovery finds them, should the agent stop now
	}
	if held.log != "" {
		c.LogDir = held.log
	}
	a.saveLocked(c)
	a.mu.Unlock()

	err = a.rt.Destroy(ctx, id) // the previous run's cgroups, state and shim
	if errors.Is(err, ErrNotFound) {
		err = nil
	}
	var in *RuntimeInfo
	if err == nil {
		in, err = a.rt.Launch(ctx, p.launchSpec(c, held))
	}

	a.mu.Lock()
	defer a.mu.Unlock()
	if err != nil {
		a.settleLocked(id, false)
		c.State = StateExited
		c.Exit = &ExitStatus{Code: -1, Reason: ReasonRestartFailed, Message: err.Error(), FinishedAt: time.Now().UTC()}
		close(a.done[id])
		a.saveLocked(c)
		return nil, fmt.Errorf("restart %s: %w", id, err)
	}
	c.Restarts++
	a.startedLocked(c, in)
	a.log.Info("restarted container", "id", id, "name", c.Name, "pid", c.Pid, "restarts", c.Restarts)
	return c.clone(), nil
}

// hold moves a stopped container's directories prev out of the
// runtime's, which Destroy removes, to held(id), and returns where they
// are; a field is "" (logged) for a directory there is none of or that
// cannot be moved: the new run then gets a new one. A directory held
// already (a failed restart's) stays.
func (a *Agent) hold(id string, prev heldDirs) heldDirs {
	to := a.held(id)
	move := func(what, from, to string) string {
		switch from {
		case to:
			return to
		case "":
			return ""
		}
		if _, err := os.Stat(from); err != nil {
			a.log.Warn("restart: the previous run's "+what+" is gone; the new run gets a new one", "id", id, "err", err)
			return ""
		}
		if err := os.MkdirAll(filepath.Dir(to), 0o700); err != nil {
			a.log.Warn("restart: keep the "+what, "id", id, "err", err)
			return ""
		}
		if err := os.Rename(from, to); err != nil {
			a.log.Warn("restart: keep the "+what, "id", id, "err", err)
			return ""
		}
		return to
	}
	return heldDirs{sandbox: move("sandbox", prev.sandbox, to.sandbox), log: move("log", prev.log, to.log)}
}
