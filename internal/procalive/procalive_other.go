//go:build !linux

package procalive

import "net"

// Runs says every process runs: it can tell only on Linux.
func Runs(int) bool { return true }

// PeerPID returns 0: it can tell only on Linux.
func PeerPID(net.Conn) int { return 0 }
