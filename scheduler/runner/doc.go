// Package runner is the framework behind `brim run`: it runs copies of
// one task through a scheduler.Driver, launching them on offers that fit,
// reporting their state transitions, and ending with the first failed
// task's exit code.
//
// Its core is pure: match assigns pending tasks to offers (table-tested
// without gRPC); Run drives it from the driver's callbacks. Run never
// waits silently: it prints what it is waiting for (the master, offers
// that fit) and gives up after Config.Timeout with the reason: the
// master's dial error, or for a task that fits no offer the largest free
// resources any agent offered. A launch the master refuses for good (an
// invalid task ID, or one in use) ends the run at once. A launch whose
// call failed without the master's answer (scheduler.InDoubt: the leader
// died after staging it) counts as launched: the reconciliation after
// the next subscription tells its state, or LOST; a task is never
// launched twice.
//
// Run's errors: *ExitError (a task failed), ErrInterrupted (ctx ended
// before any task ran to its end), errors wrapping ErrTimeout or
// ErrRefused, and the driver's own Run error (the master refused the
// framework). It never talks to agents and owns no goroutine after Run
// returns.
package runner
