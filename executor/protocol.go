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
}

// response is the shim's one line of JSON answer.
type response struct {
	V         int        `json:"v"`
	Error     string     `json:"error,omitempty"`
	ErrorKind string     `json:"error_kind,omitempty"`
	State     *ShimState `json:"state,omitempty"`
}

const errKindNotRunning = "not-running"

// Status is a container's state as its shim sees it.
type Status string

// Statuses.
const (
	StatusRunning Status = "running"
	StatusExited  Status = "exited"
)

// ShimState is the answer to State, Wait and Kill.
type ShimState struct {
	ID        string      `json:"id"`
	Status    Status      `json:"status"`
	Pid       int         `json:"pid"`
	ShimPid   int         `json:"shim_pid"`
	StartedAt time.Time   `json:"started_at"`
	Exit      *ExitStatus `json:"exit,omitempty"`
}

// Client talks to the shim of one container. Every call uses its own
// connection, so a Client is safe for concurrent use and holds nothing to
// close.
type Client struct {
	dir string
}

// NewClient returns a client for the shim serving container directory dir.
// It does not connect; calls return errors wrapping ErrShimGone when no
// shim answers.
func NewClient(dir string) *Client { return &Client{dir: dir} }

// State returns the container's state.
func (c *Client) State(ctx context.Context) (*ShimState, error) {
	return c.call(ctx, request{Op: opState})
}

// Signal sends sig to the container's init process. It returns an error
// wrapping ErrNotRunning once the container has exited.
func (c *Client) Signal(ctx context.Context, sig syscall.Signal) error {
	_, err := c.call(ctx, request{Op: opSignal, Signal: int(sig)})
	return err
}

// Kill sends SIGTERM to the container's init, waits up to grace for it to
// exit, then kills every process of the container with SIGKILL; grace ≤ 0
// kills at once. It returns once the container has exited, with its state.
func (c *Client) Kill(ctx context.Context, grace time.Duration) (*ShimState, error) {
	return c.call(ctx, request{Op: opKill, GraceNanos: int64(grace)})
}

// Wait blocks until the container has exited and returns its state.
func (c *Client) Wait(ctx context.Context) (*ShimState, error) {
	return c.call(ctx, request{Op: opWait})
}

func (c *Client) call(ctx context.Context, req request) (*ShimState, error) {
	req.V = ProtocolVersion
	conn, err := dialSocket(ctx, c.dir)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	// Unblock the read when ctx ends (Wait and Kill may take long).
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	if err := json.NewEncoder(conn).Encode(req); err != nil {
		return nil, fmt.Errorf("send %s to shim: %w", req.Op, errors.Join(ErrShimGone, err))
	}
	line, err := bufio.NewReader(conn).ReadBytes('\n')
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("shim %s: %w", req.Op, ctx.Err())
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
// sun_path are reached through /proc/self/fd/<dirfd>/shim.sock.
func dialSocket(ctx context.Context, dir string) (net.Conn, error) {
	var d net.Dialer
	path := filepath.Join(dir, SocketFile)
	if len(path) <= maxSocketPath {
		conn, err := d.DialContext(ctx, "unix", path)
		if err != nil {
			return nil, fmt.Errorf("dial shim: %w: %w", ErrShimGone, err)
		}
		return conn, nil
	}
	short, closeDir, err := shortSocketPath(dir)
	if err != nil {
		return nil, fmt.Errorf("dial shim: %w", err)
	}
	defer closeDir()
	conn, err := d.DialContext(ctx, "unix", short)
	if err != nil {
		return nil, fmt.Errorf("dial shim: %w: %w", ErrShimGone, err)
	}
	return conn, nil
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
