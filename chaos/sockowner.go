//go:build linux

package chaos

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"

	"github.com/vishvananda/netlink"
)

// connPid says which of pids holds the client end of c, a connection a
// proxy accepted on loopback (0: none of them): the kernel's socket
// diagnostics name the client socket's inode, and /proc/PID/fd the
// process that holds it. The client's fd exists before its SYN is sent,
// so an accepted connection is always found.
func connPid(c net.Conn, pids []int) int {
	s, err := netlink.SocketGet(c.RemoteAddr(), c.LocalAddr())
	if err != nil || s.INode == 0 {
		return 0
	}
	want := fmt.Sprintf("socket:[%d]", s.INode)
	for _, pid := range pids {
		if pid <= 0 {
			continue
		}
		dir := filepath.Join("/proc", strconv.Itoa(pid), "fd")
		ents, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range ents {
			if l, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil && l == want {
				return pid
			}
		}
	}
	return 0
}
