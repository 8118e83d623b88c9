// Package agentd assembles the node agent daemon from one Config value:
// `brim agent` fills it from its flags, `brim dev` starts from DevConfig
// and fills it from the same flags (Nomad's command/agent DevConfig), and
// both go through New and Daemon.Run, so dev mode cannot drift from the
// real agent.
//
// New checks the Config (Validate: every error a *ConfigError naming the
// flag), reads the reloadable settings file and opens the estimator and
// QoS controller from the registries cmd built, creating nothing on the
// host. Run then takes the agent's socket, builds the cgroup isolator, the
// run-queue latency source, the network isolator (Config.Network), the
// containerizer and the agent (runtime.go adapts the containerizer to
// agent.Runtime), and runs, in one errgroup so that one failing server
// stops the others: the agent's local API, the Prometheus metrics server,
// the eBPF OOM watcher, the master link (agent/taskrunner, once the agent
// is Ready) and the SIGHUP reloader. Ending the context stops them all;
// containers keep running.
//
// Cleanup (`brim agent cleanup`) is the one way out: with no agent
// running it kills what is left of the containers through the cgroup
// isolator's Teardown and removes everything the agent made, layer by
// layer (cleanup.go).
//
// It never parses flags, names no concrete estimator or QoS controller
// (the registries are given) and never kills a container outside
// Cleanup.
//
// Errors: *ConfigError for a bad setting (an operator's mistake, before
// anything is created); agent.ErrAgentRunning when another agent holds the
// socket or state dir (Run, Cleanup); masterlink.ErrRejected when the master refuses the
// agent.
package agentd
