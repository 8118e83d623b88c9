package executor

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// The launch handshake between the containerizer and a starting shim runs
// over two pipes the shim inherits: the shim writes Reports to fd
// ReportFD, and reads one byte from fd GoFD between "created" (the init
// process exists, the user process has not run) and exec of the user
// process. That gap is where the containerizer calls the isolators'
// Isolate(pid). EOF on GoFD aborts the launch: the shim destroys the
// container and exits. Before "created" the shim checks that the init is
// in the bundle's cgroup and network namespace (ErrNotConfined otherwise);
// with Bundle.SkipGoAhead it reports no "created", does not read GoFD and
// execs the user process at once (the containerizer still writes the
// byte, for older shims, and accepts their "created").
//
// A warm sandbox (Bundle.Warm) is a launch stopped short of its task:
//
//	containerizer                         shim                     sandbox init
//	  bundle.json, then
//	  dir of the sandbox\n  ── GoFD ──▶   read the bundle
//	  the isolators' groups
//	  prepared\n            ── GoFD ──▶   make the container ──▶   exec trampoline,
//	                                       (late cgroup join)        block on its pipe
//	                      ◀── ReportFD ── "ready" {pid}
//	  ... claim: rename the directory and the groups, write the limits
//	  and the final bundle ...
//	  final directory\n     ── GoFD ──▶   chown output, hostname,
//	                                       oom_score_adj, join the
//	                                       unified group, verify
//	                                       user, env, cwd, argv ──▶  setuid, chdir,
//	                                                                 caps, execve
//	                      ◀── ReportFD ── "running" {pid}  (the exec happened)
//
// The shim knows the sandbox's groups (the bundle's CgroupPath) before
// the isolators make them: whenever its agent dies, EOF on GoFD reaches
// a shim that can remove them, whatever the phase of the making. EOF on
// GoFD before the claim (the agent closed the pool or died) destroys the
// sandbox: the shim kills it, removes libcontainer's state and the
// groups, and exits; so does any failure before the claim. The
// directory is the next agent's (Recover) or `brim agent cleanup`'s.
const (
	// ReportFD is the shim's fd for its launch reports (ExtraFiles[0]).
	ReportFD = 3
	// GoFD is the shim's fd it reads the go-ahead byte from (ExtraFiles[1]).
	GoFD = 4
)

// Report events.
const (
	// EventCreated: the container's init exists (Pid), blocked before exec.
	EventCreated = "created"
	// EventRunning: the init has been released to exec the user process.
	EventRunning = "running"
	// EventError: the launch failed (Error, Kind); the shim cleans up and
	// exits.
	EventError = "error"
	// EventReady: a warm sandbox is made (Pid is its init, blocked before
	// the task's exec) and waits for its claim.
	EventReady = "ready"
	// EventFree: a recycled shim's container has ended, exit.json is
	// written, and the shim has left the container's directory (nothing
	// of it mounted or open): it waits for another container directory
	// on GoFD, as a warm shim (RunOptions.Recycle).
	EventFree = "free"
	// EventRetired: a recycled shim's container has ended and exit.json
	// is written, but the shim takes no other container (Error says
	// why: a bound reached, something of the container left in it); it
	// exits.
	EventRetired = "retired"
)

// SandboxPrepared is the line the containerizer writes on GoFD once the
// isolators have made a warm sandbox's groups: its shim reads it before
// it makes the container (EOF instead: the agent died, the shim removes
// the groups and exits).
const SandboxPrepared = "prepared"

// Error kinds in a Report.
const (
	kindCommandNotFound = "command-not-found"
)

// Report is one line of the launch handshake.
type Report struct {
	Event string `json:"event"`
	Pid   int    `json:"pid,omitempty"`
	Error string `json:"error,omitempty"`
	Kind  string `json:"kind,omitempty"`
	// Steps time the shim's part of the launch ("running" and "ready"
	// reports), in order: where the milliseconds go (docs/benchmarks.md).
	Steps []Step `json:"steps,omitempty"`
	// Start and Sent are when the shim began its part and sent this
	// report, in Unix nanoseconds: the containerizer's clock is the
	// same, so the hand-offs between the two are timed too.
	Start int64 `json:"start,omitempty"`
	Sent  int64 `json:"sent,omitempty"`
}

// Step is one timed phase of a launch.
type Step struct {
	Name string `json:"name"`
	// Micros is the phase's wall time in microseconds.
	Micros int64 `json:"us"`
}

// stepClock records Steps: each mark closes the phase since the previous
// one (or the clock's start). Not safe for concurrent use.
type stepClock struct {
	start time.Time
	last  time.Time
	steps []Step
}

func newStepClock() *stepClock {
	now := time.Now()
	return &stepClock{start: now, last: now}
}

// report returns a report of event with the clock's steps and times.
func (c *stepClock) report(event string, pid int) Report {
	return Report{Event: event, Pid: pid, Steps: c.steps, Start: c.start.UnixNano(), Sent: time.Now().UnixNano()}
}

// initSched adds, as two steps of no duration of their own, how much of
// the time since the init started it spent on a CPU and waiting for one
// (/proc/<pid>/schedstat): on a loaded host most of a launch is the
// second.
func (c *stepClock) initSched(pid int) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/schedstat")
	if err != nil {
		return
	}
	f := strings.Fields(string(data))
	if len(f) < 2 {
		return
	}
	on, _ := strconv.ParseInt(f[0], 10, 64)
	wait, _ := strconv.ParseInt(f[1], 10, 64)
	c.steps = append(c.steps, Step{Name: "(init on a CPU)", Micros: on / 1000}, Step{Name: "(init waiting for a CPU)", Micros: wait / 1000})
}

// mark ends the current phase as name.
func (c *stepClock) mark(name string) {
	now := time.Now()
	c.steps = append(c.steps, Step{Name: name, Micros: now.Sub(c.last).Microseconds()})
	c.last = now
}

// Err returns the launch error an EventError report carries, wrapping
// ErrCommandNotFound when the command does not exist in the container.
func (r *Report) Err() error {
	if r.Event != EventError {
		return nil
	}
	if r.Kind == kindCommandNotFound {
		return fmt.Errorf("%w: %s", ErrCommandNotFound, r.Error)
	}
	return errors.New(r.Error)
}

// ReportReader reads a shim's launch reports.
type ReportReader struct{ r *bufio.Reader }

// NewReportReader reads reports from r (the read end of the report pipe).
func NewReportReader(r io.Reader) *ReportReader { return &ReportReader{r: bufio.NewReader(r)} }

// Next returns the next report. io.ErrUnexpectedEOF means the shim died
// or closed the pipe without reporting.
func (rr *ReportReader) Next() (*Report, error) {
	line, err := rr.r.ReadBytes('\n')
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("read shim report: %w", io.ErrUnexpectedEOF)
		}
		return nil, fmt.Errorf("read shim report: %w", err)
	}
	var rep Report
	if err := json.Unmarshal(line, &rep); err != nil {
		return nil, fmt.Errorf("decode shim report: %w", err)
	}
	return &rep, nil
}

func writeReport(w io.Writer, rep Report) error {
	data, err := json.Marshal(rep)
	if err != nil {
		return err
	}
	_, err = w.Write(append(data, '\n'))
	return err
}
