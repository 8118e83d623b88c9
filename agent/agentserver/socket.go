package agentserver

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/brimnode/brim/agent"
	"github.com/brimnode/brim/agent/agentpb"
)

// Listen opens the agent's unix socket at path, root-only: the socket is
// 0600 and a directory it creates is 0700. A socket file left by a dead
// agent is replaced; if an agent answers on it, Listen returns an error
// wrapping agent.ErrAgentRunning. The returned listener removes the socket when
// closed.
func Listen(path string) (*net.UnixListener, error) {
	if path == "" || !filepath.IsAbs(path) {
		return nil, fmt.Errorf("listen: %w: socket path %q must be absolute", agent.ErrInvalidArgument, path)
	}
	if err := agentpb.CheckSocketPath(path); err != nil {
		return nil, fmt.Errorf("listen: %w: %w", agent.ErrInvalidArgument, err)
	}
	dir := filepath.Dir(path)
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("listen: create socket dir: %w", err)
		}
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != os.ModeSocket {
			return nil, fmt.Errorf("listen: %w: %s exists and is not a socket", agent.ErrInvalidArgument, path)
		}
		if conn, err := net.DialTimeout("unix", path, 2*time.Second); err == nil {
			alive := listenerAlive(conn)
			conn.Close()
			if alive {
				return nil, fmt.Errorf("listen: %w on %s", agent.ErrAgentRunning, path)
			}
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("listen: remove stale socket: %w", err)
		}
	}
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	// The directory keeps others out until the mode is set (when it is ours).
	if err := os.Chmod(path, 0o600); err != nil {
		_ = l.Close() // failing with the chmod error
		return nil, fmt.Errorf("listen: %w", err)
	}
	l.SetUnlinkOnClose(true)
	return l, nil
}

// limitConns bounds l's open connections to max (0: no bound): a
// connection beyond it is closed as soon as it is accepted, so that its
// client fails at once rather than waiting in the backlog, and logged
// (the first and then every 100th).
func limitConns(l net.Listener, max int, log *slog.Logger) net.Listener {
	if max <= 0 {
		return l
	}
	return &connLimit{Listener: l, slots: make(chan struct{}, max), log: log}
}

type connLimit struct {
	net.Listener
	slots   chan struct{}
	log     *slog.Logger
	refused atomic.Int64
}

func (l *connLimit) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case l.slots <- struct{}{}:
			return &limitedConn{Conn: c, release: func() { <-l.slots }}, nil
		default:
		}
		c.Close()
		if n := l.refused.Add(1); n%100 == 1 {
			l.log.Warn("local API: connection refused: too many open", "max", cap(l.slots), "refused", n)
		}
	}
}

// limitedConn gives its slot back once, on the first Close.
type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
