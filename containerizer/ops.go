package containerizer

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"syscall"
	"time"

	"github.com/brimnode/brim/executor"
	"github.com/brimnode/brim/isolator"
)

// Wait blocks until the container has exited and returns how it ended.
// It returns ErrNotFound for an unknown id, and ctx's error when ctx ends
// first.
func (c *Containerizer) Wait(ctx context.Context, id string) (*ExitStatus, error) {
	ct, err := c.get(id)
	if err != nil {
		return nil, fmt.Errorf("wait %s: %w", id, err)
	}
	st, err := c.wait(ctx, ct)
	if err != nil {
		return nil, fmt.Errorf("wait %s: %w", id, err)
	}
	return st, nil
}

func (c *Containerizer) wait(ctx context.Context, ct *container) (*ExitStatus, error) {
	if st := ct.exitStatus(); st != nil {
		c.release(ctx, ct)
		return st, nil
	}
	// The shim answers Wait only when the container exits: meanwhile it
	// is asked for its state now and then, and a shim that leaves
	// shimMisses probes in a row unanswered is escalated.
	wctx, stop := context.WithCancelCause(ctx)
	probed := make(chan struct{})
	go func() {
		defer close(probed)
		c.probeShim(wctx, ct, stop)
	}()
	s, err := c.client(ct).Wait(wctx)
	stop(nil)
	<-probed
	if err == nil && s.Exit != nil {
		ct.setExit(s.Exit)
		c.release(ctx, ct)
		return s.Exit, nil
	}
	if cause := context.Cause(wctx); ctx.Err() == nil && errors.Is(cause, executor.ErrShimUnresponsive) {
		err = cause
	}
	if errors.Is(err, executor.ErrShimUnresponsive) {
		return c.escalate(ctx, ct, err)
	}
	if err != nil && !errors.Is(err, executor.ErrShimGone) {
		return nil, err
	}
	return c.exitOfGoneShim(ctx, ct)
}

// probeShim asks ct's shim for its state every other ShimTimeout until ctx
// ends; after shimMisses unanswered probes in a row it ends ctx through
// stop with an error wrapping executor.ErrShimUnresponsive.
func (c *Containerizer) probeShim(ctx context.Context, ct *container, stop context.CancelCauseFunc) {
	t := time.NewTicker(2 * c.cfg.ShimTimeout)
	defer t.Stop()
	misses := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		_, err := c.client(ct).State(ctx)
		if !errors.Is(err, executor.ErrShimUnresponsive) {
			misses = 0
			continue
		}
		misses++
		c.log.Warn("shim does not answer", "id", ct.spec.ID, "shim_pid", ct.shimPid, "misses", misses, "err", err)
		if misses >= shimMisses {
			stop(fmt.Errorf("%d probes in a row: %w", misses, err))
			return
		}
	}
}

// stillUnresponsive asks a shim whose call ran past its deadline for its
// state once more: a shim that answers is slow, not hung, and is not
// escalated.
func (c *Containerizer) stillUnresponsive(ctx context.Context, ct *container) bool {
	_, err := c.client(ct).State(ctx)
	return errors.Is(err, executor.ErrShimUnresponsive)
}

// client returns a client of ct's shim with the configured deadline.
func (c *Containerizer) client(ct *container) *executor.Client {
	return executor.NewClient(ct.dir).WithTimeout(c.cfg.ShimTimeout)
}

// exitOfGoneShim returns the exit status of a container whose shim no
// longer answers: exit.json if the shim recorded it, otherwise the shim
// died abnormally, and what is left of the container is killed and
// recorded as ReasonShimLost. A shim that is alive but has no control
// socket (removed under it) is escalated like one that does not answer.
func (c *Containerizer) exitOfGoneShim(ctx context.Context, ct *container) (*ExitStatus, error) {
	if st := ct.exitStatus(); st != nil {
		c.release(ctx, ct)
		return st, nil
	}
	// Between writing exit.json and closing its socket the shim is still
	// alive; give a live shim a moment before declaring it lost.
	if !waitShim(ctx, ct, 5*time.Second) {
		if st := ct.exitStatus(); st != nil {
			c.release(ctx, ct)
			return st, nil
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		return c.escalate(ctx, ct, fmt.Errorf("shim %d is alive but its control socket is gone: %w", ct.shimPid, executor.ErrShimUnresponsive))
	}
	if st := ct.exitStatus(); st != nil {
		c.release(ctx, ct)
		return st, nil
	}
	return c.markLost(ctx, ct)
}

// Kill stops the container: SIGTERM to its init, then, after grace,
// SIGKILL to all its processes. grace 0 means Config.KillGrace; a negative
// grace kills at once. Kill returns once the container has exited; it
// returns ErrNotRunning if it had already exited, ErrNotFound for an
// unknown id. A shim that has not answered grace plus Config.ShimTimeout
// (and its wait for the exec) later, nor a state request within
// Config.ShimTimeout after that, is escalated: the containerizer kills the
// shim and every process in the container's cgroup itself and records the
// exit with ReasonShimUnresponsive, so Kill never waits on a hung shim.
func (c *Containerizer) Kill(ctx context.Context, id string, grace time.Duration) error {
	ct, err := c.get(id)
	if err != nil {
		return fmt.Errorf("kill %s: %w", id, err)
	}
	if ct.exitStatus() != nil {
		return fmt.Errorf("kill %s: %w", id, ErrNotRunning)
	}
	if err := c.kill(ctx, ct, grace); err != nil {
		return fmt.Errorf("kill %s: %w", id, err)
	}
	return nil
}

func (c *Containerizer) kill(ctx context.Context, ct *container, grace time.Duration) error {
	switch {
	case grace == 0:
		grace = c.cfg.KillGrace
	case grace < 0:
		grace = 0
	}
	s, err := c.client(ct).Kill(ctx, grace)
	if err == nil && s.Exit != nil {
		ct.setExit(s.Exit)
		c.release(ctx, ct)
		return nil
	}
	if errors.Is(err, executor.ErrShimUnresponsive) && ctx.Err() == nil {
		if !c.stillUnresponsive(ctx, ct) {
			// Alive but slow to end the container (a loaded host):
			// wait for the exit, probing as Wait does.
			_, err = c.wait(ctx, ct)
			return err
		}
		_, err = c.escalate(ctx, ct, err)
		return err
	}
	if err != nil && !errors.Is(err, executor.ErrShimGone) {
		return err
	}
	_, err = c.exitOfGoneShim(ctx, ct)
	return err
}

// Signal sends sig to the container's init process. It returns
// ErrNotRunning once the container has exited, ErrNotFound for an unknown
// id.
func (c *Containerizer) Signal(ctx context.Context, id string, sig syscall.Signal) error {
	ct, err := c.get(id)
	if err != nil {
		return fmt.Errorf("signal %s: %w", id, err)
	}
	if ct.exitStatus() != nil {
		return fmt.Errorf("signal %s: %w", id, ErrNotRunning)
	}
	if err := c.client(ct).Signal(ctx, sig); err != nil {
		if errors.Is(err, executor.ErrShimUnresponsive) && ctx.Err() == nil && c.stillUnresponsive(ctx, ct) {
			if _, eerr := c.escalate(ctx, ct, err); eerr != nil {
				return fmt.Errorf("signal %s: %w", id, errors.Join(err, eerr))
			}
			return fmt.Errorf("signal %s: %w: %w", id, ErrNotRunning, err)
		}
		if errors.Is(err, executor.ErrNotRunning) || errors.Is(err, executor.ErrShimGone) {
			return fmt.Errorf("signal %s: %w: %w", id, ErrNotRunning, err)
		}
		return fmt.Errorf("signal %s: %w", id, err)
	}
	return nil
}

// Update applies new limits to a running container through every
// isolator, and records them for Recover. It returns ErrNotRunning once
// the container has exited.
func (c *Containerizer) Update(ctx context.Context, id string, limits isolator.Limits) error {
	ct, err := c.get(id)
	if err != nil {
		return fmt.Errorf("update %s: %w", id, err)
	}
	if ct.exitStatus() != nil {
		return fmt.Errorf("update %s: %w", id, ErrNotRunning)
	}
	for _, iso := range c.cfg.Isolators {
		if err := iso.Update(ctx, id, limits); err != nil {
			// The isolator's error names the operation and the container.
			return fmt.Errorf("%s: %w", iso.Name(), err)
		}
	}
	ct.mu.Lock()
	ct.spec.Limits = limits
	spec := ct.spec
	ct.mu.Unlock()
	if rec, err := readRecord(ct.dir); err == nil {
		rec.Spec = spec
		if err := writeRecord(ct.dir, rec); err != nil {
			return fmt.Errorf("update %s: %w", id, err)
		}
	}
	return nil
}

// Usage samples the container's resource usage from every isolator.
func (c *Containerizer) Usage(ctx context.Context, id string) (*isolator.Statistics, error) {
	if _, err := c.get(id); err != nil {
		return nil, fmt.Errorf("usage %s: %w", id, err)
	}
	stats := &isolator.Statistics{Timestamp: time.Now()}
	for _, iso := range c.cfg.Isolators {
		if err := iso.Usage(ctx, id, stats); err != nil {
			return nil, fmt.Errorf("usage %s: %s: %w", id, iso.Name(), err)
		}
	}
	return stats, nil
}

// Get describes one container; ErrNotFound for an unknown id.
func (c *Containerizer) Get(ctx context.Context, id string) (*Info, error) {
	ct, err := c.get(id)
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", id, err)
	}
	return ct.info(), nil
}

// List describes every container, sorted by ID.
func (c *Containerizer) List(ctx context.Context) ([]*Info, error) {
	c.mu.Lock()
	cts := make([]*container, 0, len(c.containers))
	for _, ct := range c.containers {
		if ct != nil {
			cts = append(cts, ct)
		}
	}
	c.mu.Unlock()
	infos := make([]*Info, 0, len(cts))
	for _, ct := range cts {
		infos = append(infos, ct.info())
	}
	sort.Slice(infos, func(i, j int) bool { return infos[i].ID < infos[j].ID })
	return infos, nil
}

// Destroy kills the container if it runs (with the default grace period),
// then removes everything of it: shim, libcontainer state, the isolators'
// state, sandbox and directory. ErrNotFound for an unknown id.
func (c *Containerizer) Destroy(ctx context.Context, id string) error {
	ct, err := c.get(id)
	if err != nil {
		return fmt.Errorf("destroy %s: %w", id, err)
	}
	ct.mu.Lock()
	if ct.destroying {
		ct.mu.Unlock()
		return fmt.Errorf("destroy %s: already in progress", id)
	}
	ct.destroying = true
	ct.mu.Unlock()
	unmark := func() { ct.mu.Lock(); ct.destroying = false; ct.mu.Unlock() }

	if ct.exitStatus() == nil {
		if err := c.kill(ctx, ct, 0); err != nil {
			unmark()
			return fmt.Errorf("destroy %s: %w", id, err)
		}
	}
	if err := c.teardown(ctx, ct); err != nil {
		unmark()
		return fmt.Errorf("destroy %s: %w", id, err)
	}
	c.mu.Lock()
	delete(c.containers, id)
	c.mu.Unlock()
	c.log.Info("container destroyed", "id", id)
	return nil
}

// releaser is an optional ability of an isolator (isolator/network): give
// back what an exited container holds on the host but no longer uses (its
// address, veth, namespace, traffic classes) before Cleanup. Release must
// be idempotent and leave Cleanup a no-op for what it released.
type releaser interface {
	Release(ctx context.Context, id string) error
}

// release runs the isolators' Release once per exited container (at its
// exit, or when Recover finds it exited); a failure is logged and the
// resources stay until Destroy's Cleanup.
func (c *Containerizer) release(ctx context.Context, ct *container) {
	ct.mu.Lock()
	done := ct.released
	ct.released = true
	ct.mu.Unlock()
	if done {
		return
	}
	ctx = context.WithoutCancel(ctx)
	for _, iso := range c.cfg.Isolators {
		r, ok := iso.(releaser)
		if !ok {
			continue
		}
		if err := r.Release(ctx, ct.spec.ID); err != nil {
			c.log.Warn("release resources of exited container", "id", ct.spec.ID, "isolator", iso.Name(), "err", err)
		}
	}
}
