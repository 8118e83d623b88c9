package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/brimnode/brim/pressure"
)

// evictor ends revocable containers for the memory guard through the
// agent, at once, so that the task's status says why.
type evictor struct{ a *Agent }

var _ pressure.Evictor = evictor{}

// evictExitWait bounds how long an eviction waits for its container's
// exit (at most the agent's KillExitTimeout). A process SIGKILL ends in
// milliseconds, and frees its memory on the way; one still there after
// this is stuck (uninterruptible sleep in reclaim, a hung disk) and
// frees nothing soon: the guard's next round goes on to the next
// largest (the agent lists this one as Stopping) instead of holding the
// guard while the node stays short of memory.
const evictExitWait = 5 * time.Second

func (e evictor) Evict(ctx context.Context, id, message string) error {
	// Grace 0: SIGKILL at once; memory is short.
	wait := min(evictExitWait, e.a.opts.KillExitTimeout)
	_, err := e.a.killWithin(ctx, id, 0, wait, ReasonPreempted, message)
	if errors.Is(err, ErrStillExiting) {
		// Killed, not gone yet: the exit keeps the reason when it comes.
		e.a.log.Warn("evicted container still exiting: the memory guard goes on", "id", id, "waited", wait)
		return nil
	}
	return err
}

// newGuards builds the configured pressure guards over a (before the
// agent serves, so that status reads them without a lock).
func (o *oversub) newGuards(a *Agent) error {
	if c := o.cfg.MemoryGuard; c != nil {
		g, err := pressure.NewMemory(*c, a, o.cfg.MemoryScope, evictor{a}, a.opts.Log)
		if err != nil {
			return err
		}
		o.memG = g
		o.reg.MustRegister(g)
	}
	if c := o.cfg.IOGuard; c != nil {
		if o.cfg.IOThrottler == nil {
			return fmt.Errorf("io guard without a throttler: %w", ErrNotSupported)
		}
		g, err := pressure.NewIO(*c, a, o.cfg.IOThrottler, a.opts.Log)
		if err != nil {
			return err
		}
		o.ioG = g
		o.reg.MustRegister(g)
	}
	return nil
}

// guardLoops returns the guards' loops (owned by the agent, like the QoS
// loop).
func (o *oversub) guardLoops(a *Agent) []func() error {
	var loops []func() error
	if g := o.memG; g != nil {
		loops = append(loops, func() error { return g.Run(a.ctx) })
	}
	if g := o.ioG; g != nil {
		loops = append(loops, func() error { return g.Run(a.ctx) })
	}
	return loops
}

func (o *oversub) evictions() []pressure.Eviction {
	if o.memG == nil {
		return nil
	}
	return o.memG.Evictions()
}

func (o *oversub) ioThrottled() []string {
	if o.ioG == nil {
		return nil
	}
	return o.ioG.Throttled()
}
