package executor

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// ProtocolVersion is the control protocol's version. A request or response
// with another version is refused, so a newer agent fails clearly against
// an older shim (and the other way round).
const ProtocolVersion = 1

// Operations of the control protocol.
const (
	opState  = "state"
	opSignal = "signal"
	opKill   = "kill"
	opWait   = "wait"
)

// request is one line of JSON sent by the client on a fresh connection.
type request struct {
	V      int    `json:"v"`
	Op     string `json:"op"`
	Signal int    `json:"signal,omitempty"`
	// GraceNanos is Kill's grace period; ≤ 0 kills at once.
	GraceNanos int64 `json:"grace_ns,omitempty"`
	// Exec is the process of an exec session (stdio.go).
	Exec *ExecSpec `json:"exec,omitempty"`
}

// response is the shim's one line of JSON answer.
type response struct {
	V         int        `json:"v"`
	Error     string     `json:"error,omitempty"`
	ErrorKind string     `json:"error_kind,omitempty"`
	State     *ShimState `json:"state,omitempty"`
	// Pid is an exec session's process (its host pid).
	Pid int `json:"pid,omitempty"`
}

// Error kinds of a response.
const (
	errKindNotRunning = "not-running"
	errKindRefused    = "refused"
)

// Status is a container's state as its shim sees it.
type Status string

// Statuses.
const (
	StatusRunning Status = "running"
	StatusExited  Status = "exited"
)

// ShimState is the answer to State, Wait and Kill.
type ShimState struct {
	ID        string
	Status    Status
	Pid       int
	ShimPid   int
	StartedAt time.Time
	Exit      *ExitStatus
}

// shimStateJSON is ShimState on the wire, its exit as exit.json has it.
type shimStateJSON struct {
	ID        string      `json:"id"`
	Status    Status      `json:"status"`
	Pid       int         `json:"pid"`
	ShimPid   int         `json:"shim_pid"`
	StartedAt time.Time   `json:"started_at"`
	Exit      *exitRecord `json:"exit,omitempty"`
}

// MarshalJSON encodes s in the protocol's format.
func (s ShimState) MarshalJSON() ([]byte, error) {
	return json.Marshal(shimStateJSON{ID: s.ID, Status: s.Status, Pid: s.Pid, ShimPid: s.ShimPid, StartedAt: s.StartedAt, Exit: recordOf(s.Exit)})
}

// UnmarshalJSON decodes s from the protocol's format.
func (s *ShimState) UnmarshalJSON(b []byte) error {
	var w shimStateJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*s = ShimState{ID: w.ID, Status: w.Status, Pid: w.Pid, ShimPid: w.ShimPid, StartedAt: w.StartedAt, Exit: w.Exit.status()}
	return nil
}

// DefaultCallTimeout is how long a Client waits for a shim's answer beyond
// the work the call asks for (none for State, the grace period and the
// container's end for Kill): a shim answers State in well under a
// millisecond, so a shim silent for this long is stopped or hung.
const DefaultCallTimeout = 5 * time.Second

// execWaitSlack is what Signal and Kill may spend waiting for the init to
// exec the user process before they act (the shim's execWait).
const execWaitSlack = 2 * time.Second

// Client talks to the shim of one container. Every call uses its own
// connection and has a deadline, so a Client is safe for concurrent use,
// holds nothing to close, and no call blocks on a stopped or hung shim for
// longer than its deadline (it then returns ErrShimUnresponsive).
type Client struct {
	dir     string
	timeout time.Duration
}

// NewClient returns a client for the shim serving container directory dir,
// with DefaultCallTimeout. It does not connect; calls return errors
// wrapping ErrShimGone when no shim answers and ErrShimUnresponsive when a
// shim does not answer in time.
func NewClient(dir string) *Client { return &Client{dir: dir, timeout: DefaultCallTimeout} }

// WithTimeout returns a client for the same shim whose calls wait d (> 0)
// for an answer beyond their own work instead of DefaultCallTimeout.
func (c *Client) WithTimeout(d time.Duration) *Client {
	if d <= 0 {
		d = DefaultCallTimeout
	}
	return &Client{dir: c.dir, timeout: d}
}

// State returns the container's state. It waits at most the client's
// timeout.
func (c *Client) State(ctx context.Context) (*ShimState, error) {
	return c.call(ctx, request{Op: opState}, c.timeout)
}

// Signal sends sig to the container's init process. It returns an error
// wrapping ErrNotRunning once the container has exited.
func (c *Client) Signal(ctx context.Context, sig syscall.Signal) error {
	_, err := c.call(ctx, request{Op: opSignal, Signal: int(sig)}, execWaitSlack+c.timeout)
	return err
}

// Kill sends SIGTERM to the container's init, waits up to grace for it to
// exit, then kills every process of the container with SIGKILL; grace ≤ 0
// kills at once. It returns once the container has exited, with its state,
// or ErrShimUnresponsive when the shim has not answered grace plus the
// client's timeout (and the shim's wait for the exec) after the call.
func (c *Client) Kill(ctx context.Context, grace time.Duration) (*ShimState, error) {
	return c.call(ctx, request{Op: opKill, GraceNanos: int64(grace)}, max(grace, 0)+execWaitSlack+c.timeout)
}

// Wait blocks until the container has exited and returns its state. It has
// no deadline of its own (a container may run for months): the caller
// bounds it with ctx and checks the shim with State meanwhile.
func (c *Client) Wait(ctx context.Context) (*ShimState, error) {
	return c.call(ctx, request{Op: opWait}, 0)
}

// errCallTimeout is the cause of a call's own deadline (limit), told apart
// from the end of the caller's ctx.
var errCallTimeout = errors.New("shim call deadline")

// call sends req on a new connection and reads the answer, within limit
// when limit > 0.
func (c *Client) call(ctx context.Context, req request, limit time.Duration) (*ShimState, error) {
	req.V = ProtocolVersion
	cctx := ctx
	if limit > 0 {
		var cancel context.CancelFunc
		cctx, cancel = context.WithTimeoutCause(ctx, limit, errCallTimeout)
		defer cancel()
	}
	// ctxErr names why cctx ended: the caller's ctx, or our deadline.
	ctxErr := func() error {
		if err := ctx.Err(); err != nil {
			return err
		}
		return fmt.Errorf("%w: no answer within %v", ErrShimUnresponsive, limit)
	}
	conn, err := dialSocket(cctx, c.dir)
	if err != nil {
		if cctx.Err() != nil && !errors.Is(err, ErrShimGone) {
			return nil, fmt.Errorf("shim %s: %w", req.Op, ctxErr())
		}
		return nil, err
	}
	defer conn.Close()
	// Unblock the write and read when cctx ends.
	stop := context.AfterFunc(cctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	if err := json.NewEncoder(conn).Encode(req); err != nil {
		if cctx.Err() != nil {
			return nil, fmt.Errorf("send %s to shim: %w", req.Op, ctxErr())
		}
		return nil, fmt.Errorf("send %s to shim: %w", req.Op, errors.Join(ErrShimGone, err))
	}
	line, err := bufio.NewReader(conn).ReadBytes('\n')
	if err != nil {
		if cctx.Err() != nil {
			return nil, fmt.Errorf("shim %s: %w", req.Op, ctxErr())
		}
		// The shim closes connections only when it exits.
		return nil, fmt.Errorf("shim %s: %w: %w", req.Op, ErrShimGone, err)
	}
	var resp response
	if err := json.Unmarshal(line, &resp); err != nil {
		return nil, fmt.Errorf("decode shim response: %w", err)
	}
	if resp.V != ProtocolVersion {
		return nil, fmt.Errorf("shim speaks protocol version %d, want %d", resp.V, ProtocolVersion)
	}
	if resp.Error != "" {
		if resp.ErrorKind == errKindNotRunning {
			return resp.State, fmt.Errorf("shim %s: %w", req.Op, ErrNotRunning)
		}
		return resp.State, fmt.Errorf("shim %s: %s", req.Op, resp.Error)
	}
	if resp.State == nil {
		return nil, fmt.Errorf("shim %s: empty response", req.Op)
	}
	return resp.State, nil
}

// maxSocketPath is sun_path's size (108) minus the terminating NUL.
const maxSocketPath = 107

// dialSocket connects to dir's control socket. Paths too long for
// sun_path are reached through /proc/self/fd/<dirfd>/shim.sock. No socket
// file, or nobody listening on it, is ErrShimGone; a full accept queue (a
// shim that stopped accepting) is ErrShimUnresponsive.
func dialSocket(ctx context.Context, dir string) (net.Conn, error) {
	path := filepath.Join(dir, SocketFile)
	if len(path) <= maxSocketPath {
		return dialUnix(ctx, path)
	}
	short, closeDir, err := shortSocketPath(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("dial shim: %w: %w", ErrShimGone, err)
		}
		return nil, fmt.Errorf("dial shim: %w", err)
	}
	defer closeDir()
	return dialUnix(ctx, short)
}

func dialUnix(ctx context.Context, path string) (net.Conn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", path)
	switch {
	case err == nil:
		return conn, nil
	case errors.Is(err, syscall.EAGAIN):
		return nil, fmt.Errorf("dial shim: %w: %w", ErrShimUnresponsive, err)
	case ctx.Err() != nil:
		return nil, fmt.Errorf("dial shim: %w", err)
	}
	return nil, fmt.Errorf("dial shim: %w: %w", ErrShimGone, err)
}

// shortSocketPath opens dir and returns a short path to its socket through
// the open descriptor; call closeDir once the socket is dialled or bound.
func shortSocketPath(dir string) (path string, closeDir func(), err error) {
	f, err := os.Open(dir)
	if err != nil {
		return "", nil, err
	}
	return fmt.Sprintf("/proc/self/fd/%d/%s", f.Fd(), SocketFile), func() { f.Close() }, nil
}
