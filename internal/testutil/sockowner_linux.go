package testutil

import (
	"net"

	"github.com/brimnode/brim/internal/procalive"
)

// SocketServedBy reports whether the unix socket at path answers and was
// made to listen by process pid. A harness that restarts a daemon waits
// for this rather than for any answer: right after a kill -9 the dead
// daemon's listener can still take connections for a moment (a child
// forked before the kill holds it until its exec), and a test that took
// that for the new daemon would talk to nobody.
func SocketServedBy(path string, pid int) bool {
	c, err := net.Dial("unix", path)
	if err != nil {
		return false
	}
	defer c.Close()
	return procalive.PeerPID(c) == pid
}
