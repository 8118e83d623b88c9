// Package exitstatus is how a container ended, defined once: Status (exit
// code, signal, OOM kill, Reason, message, time), which the shim records,
// the containerizer returns, the agent checkpoints and the task runner
// maps to a task's final state; and Reason, the closed vocabulary of
// causes every one of them sets or reads. executor, containerizer, agent
// and qos alias these names; agent/taskrunner holds the one table that
// maps each Reason to a Mesos task state, reason and message.
//
// It also names Linux's signals by number (SignalName, SignalNumber): the
// shim's exit.json carries a signal's name, the agent's API its number.
//
// The package imports only the standard library, never logs and has no
// sentinels.
package exitstatus
