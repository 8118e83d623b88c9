// Package cli holds brim's client commands: the cobra commands that talk
// to a running agent (`brim container`, `brim agent info|explain|
// report-latency`) or master (`brim state`, `reserve`, `quota`, `weights`,
// `demand`, `run`), and the dispatcher of `brim experiment`. Each command
// is flags, validation and printing over a client package
// (agent/agentclient, client, scheduler/runner); nothing here holds state
// between calls, but for the resize goroutine of `stats --watch`'s
// full-screen view, which the command owns and stops. Commands complete
// their arguments from the running daemons (complete.go: containers from
// the agent; agents, roles and demands from the master), each completion
// bounded to 2 s; the hidden `brim docs man DIR` writes the manual pages.
//
// The processes brim runs as (agent, master, dev, shim) are assembled in
// cmd/brim, which adds these commands to its root (Commands) and shares
// the exit-code convention (ExitError) and the master-connection flags
// (MasterTLS, FrameworkSecret, ResolveMasters) defined here.
//
// Exit codes: 0 success; 1 the request failed (the agent's or master's
// message is printed); 2 bad usage, nothing was sent; 130 interrupted;
// `--wait` and `brim run` exit with the task's own code.
package cli
