// Package procio holds the two types a process session's stdio is made
// of — where its input comes from and its output goes to, and a
// terminal's size — shared by the agent core (agent.Stdio), the shim's
// client side (executor.Stdio) and what joins them (agent/agentd), so
// that a session passes through every layer unconverted.
package procio
