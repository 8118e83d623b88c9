//go:build !linux

package transport

import "net"

// peekTCP is not supported here: connections are peeked through a
// buffer (splitListener.route).
func peekTCP(net.Conn, int) ([]byte, bool) { return nil, false }
