package executor

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
)

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
