package exitstatus

import "time"

// Status records how a container ended. The JSON form is the agent's
// checkpoint's; the shim's exit.json keeps a format of its own (see
// executor).
type Status struct {
	// Code is the exit code of the container's init process, 128+n when
	// signal n killed it, -1 when unknown.
	Code int `json:"code"`
	// Signal is the number of the signal that killed the init, 0 for none.
	Signal int `json:"signal,omitempty"`
	// OOMKilled is true when the kernel's OOM killer killed a process of
	// the container at the container's memory limit.
	OOMKilled bool   `json:"oomKilled,omitempty"`
	Reason    Reason `json:"reason,omitempty"`
	// Message is a human explanation.
	Message    string    `json:"message,omitempty"`
	FinishedAt time.Time `json:"finishedAt"`
}

// Reason is the machine-readable cause of a container's end. The zero
// value, ReasonNone, is a plain exit of the command.
type Reason string

// The reasons. A new one goes here, in Reasons, and in the task runner's
// table (whose test fails until it does).
const (
	// ReasonNone: the command ended by itself (its exit code or the signal
	// that killed it says how); nobody else ended it.
	ReasonNone Reason = ""
	// ReasonMemoryLimit: the container hit its memory limit and the OOM
	// killer ran (set by the shim).
	ReasonMemoryLimit Reason = "memory-limit"
	// ReasonKilled: the container was killed on request (a kill through
	// the agent's API or a task kill; set by the shim).
	ReasonKilled Reason = "killed"
	// ReasonPreempted: a QoS correction or a safety guard killed a
	// revocable container (set by the agent; the same string as the task
	// reason CONTAINER_PREEMPTED).
	ReasonPreempted Reason = "CONTAINER_PREEMPTED"
	// ReasonShimLost: the container's shim died without recording the
	// exit; the containerizer killed what was left of the container.
	ReasonShimLost Reason = "shim-lost"
	// ReasonShimUnresponsive: the shim stopped answering its control
	// socket; the containerizer killed the shim and every process of the
	// container (through its cgroup) and recorded the exit itself.
	ReasonShimUnresponsive Reason = "shim-unresponsive"
	// ReasonLost: nobody can tell how the container ended (it vanished
	// while the agent was down, or its init could not be waited for).
	ReasonLost Reason = "lost"
	// ReasonDiskLimit: the container wrote more to its read-write image
	// root than its disk limit, where no project quota held it; the
	// agent measured it and killed the container (set by the agent).
	ReasonDiskLimit Reason = "disk-limit"
	// ReasonRestartFailed: the agent's restart stopped the container and
	// could not run it again (its resources or a host port taken
	// meanwhile; Message says why), or the agent stopped during the
	// restart.
	ReasonRestartFailed Reason = "restart-failed"
)

// Reasons returns every Reason, ReasonNone first.
func Reasons() []Reason {
	return []Reason{ReasonNone, ReasonMemoryLimit, ReasonKilled, ReasonPreempted, ReasonShimLost, ReasonShimUnresponsive, ReasonLost,
		ReasonDiskLimit, ReasonRestartFailed}
}

// Known reports whether r is one of Reasons (a status recorded by a newer
// shim or agent may carry one this build does not know).
func (r Reason) Known() bool {
	for _, k := range Reasons() {
		if r == k {
			return true
		}
	}
	return false
}

// signalNames are Linux's signal names by number (x86, arm and their
// 64-bit forms, the architectures brim runs containers on).
var signalNames = [...]string{
	1: "SIGHUP", 2: "SIGINT", 3: "SIGQUIT", 4: "SIGILL", 5: "SIGTRAP", 6: "SIGABRT", 7: "SIGBUS",
	8: "SIGFPE", 9: "SIGKILL", 10: "SIGUSR1", 11: "SIGSEGV", 12: "SIGUSR2", 13: "SIGPIPE",
	14: "SIGALRM", 15: "SIGTERM", 16: "SIGSTKFLT", 17: "SIGCHLD", 18: "SIGCONT", 19: "SIGSTOP",
	20: "SIGTSTP", 21: "SIGTTIN", 22: "SIGTTOU", 23: "SIGURG", 24: "SIGXCPU", 25: "SIGXFSZ",
	26: "SIGVTALRM", 27: "SIGPROF", 28: "SIGWINCH", 29: "SIGIO", 30: "SIGPWR", 31: "SIGSYS",
}

// SignalName returns the name of Linux signal n ("SIGKILL"), "" for a
// number without one (0, real-time signals).
func SignalName(n int) string {
	if n <= 0 || n >= len(signalNames) {
		return ""
	}
	return signalNames[n]
}

// SignalNumber returns the number of the Linux signal named name, 0 for
// a name it does not know.
func SignalNumber(name string) int {
	if name == "" {
		return 0
	}
	for n, s := range signalNames {
		if s == name {
			return n
		}
	}
	return 0
}
