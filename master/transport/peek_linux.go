package transport

import (
	"errors"
	"net"
	"syscall"
)

// peekTCP returns the first n bytes that c received without consuming
// them (MSG_PEEK), waiting for at least one byte until c's read deadline.
// A connection routed this way is handed on as the *net.TCPConn it is:
// gRPC reads such a connection into pooled buffers only while a read is
// ready, and any other net.Conn through a 32 KiB buffer of its own for
// the connection's life (1.5 GiB at one connection per agent, 50,000
// agents). ok is false when c is no TCP connection or fewer than n bytes
// came in the first segment; nothing was consumed then.
func peekTCP(c net.Conn, n int) (head []byte, ok bool) {
	tc, isTCP := c.(*net.TCPConn)
	if !isTCP {
		return nil, false
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return nil, false
	}
	buf := make([]byte, n)
	got := 0
	var rerr error
	err = raw.Read(func(fd uintptr) bool {
		got, _, rerr = syscall.Recvfrom(int(fd), buf, syscall.MSG_PEEK)
		return !errors.Is(rerr, syscall.EAGAIN)
	})
	if err != nil || rerr != nil || got < n {
		return nil, false
	}
	return buf, true
}
