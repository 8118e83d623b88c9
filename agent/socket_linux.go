package agent

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"

	"golang.org/x/sys/unix"
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
	return processRuns(int(cred.Pid))
}

// processRuns reports whether pid exists and is not a zombie.
func processRuns(pid int) bool {
	if err := unix.Kill(pid, 0); errors.Is(err, unix.ESRCH) {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return !errors.Is(err, os.ErrNotExist)
	}
	// pid (comm) state ...: comm may hold spaces and parentheses.
	if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) {
		return b[i+2] != 'Z' && b[i+2] != 'X'
	}
	return true
}
