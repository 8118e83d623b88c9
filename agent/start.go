package agent

import (
	"context"
	"time"
)

// gcInterval is how often the retention policy runs besides after each exit.
const gcInterval = time.Minute

// Start recovers the agent's containers, starts its oversubscription
// loops and its housekeeping (the retention policy every gcInterval, the
// retry of checkpoint records a full disk held back) and marks the
// agent Ready. The loops run until Shutdown or Close. A server (the
// local API, agent/agentserver) calls it once before it serves. Errors
// are Recover's.
func (a *Agent) Start(ctx context.Context) error {
	if err := a.Recover(ctx); err != nil {
		return err
	}
	if a.over != nil {
		a.over.start(a)
	}
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		a.housekeep(a.ctx)
	}()
	a.markReady()
	return nil
}

// housekeep applies the retention policy and retries unsaved checkpoint
// records until ctx ends.
func (a *Agent) housekeep(ctx context.Context) {
	t := time.NewTicker(gcInterval)
	defer t.Stop()
	retry := time.NewTicker(checkpointRetry)
	defer retry.Stop()
	for {
		select {
		case <-t.C:
			a.collect(ctx)
		case <-retry.C:
			a.retryUnsaved()
		case <-ctx.Done():
			return
		}
	}
}

// Shutdown ends the agent's lifetime (Context): Wait, Logs and the exit
// watchers return, the loops Start began stop. Containers keep running.
// Close, after it, waits for the goroutines and releases the state dir.
// Safe for concurrent use and to call more than once.
func (a *Agent) Shutdown() { a.cancel() }

// Context is the agent's lifetime: it ends at Shutdown or Close. A
// server ends what waits on the agent (a stream of Wait or Logs) with
// it rather than after its own grace.
func (a *Agent) Context() context.Context { return a.ctx }
