package agentserver

import (
	"net"

	"github.com/brimnode/brim/internal/procalive"
)

// listenerAlive reports whether the process that made the listening
// socket conn reached still runs. A connection can succeed on a dead
// agent's socket: a child the agent was forking when it was killed -9
// holds a copy of its descriptors until the child's exec closes them
// (the copy of a mount namespace for a shim, under load, takes hundreds
// of ms), and the kernel queues the connection on that listener, which
// nobody will ever accept. The kernel keeps the listener's creator
// (SO_PEERCRED); when it is gone, or a zombie, the socket is stale.
// When the creator cannot be told (another PID namespace), it is taken
// as alive.
func listenerAlive(conn net.Conn) bool {
	pid := procalive.PeerPID(conn)
	return pid <= 0 || procalive.Runs(pid)
}
