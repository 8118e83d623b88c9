package agentserver

import (
	"net"

	"golang.org/x/sys/unix"

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
	uc, ok := conn.(*net.UnixConn)
	if !ok {
		return true
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return true
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil || credErr != nil || cred.Pid <= 0 {
		return true
	}
	return procalive.Runs(int(cred.Pid))
}
