package testutil

import (
	"net"
	"path/filepath"
	"testing"
)

// NotifySocket is systemd's side of NOTIFY_SOCKET (systemd is not PID 1 on
// these machines): a real datagram socket, named in $NOTIFY_SOCKET for the
// rest of t (so t must not run in parallel), whose messages arrive on the
// returned channel. It is closed with t.
func NotifySocket(t testing.TB) <-chan string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "notify.sock")
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	t.Setenv("NOTIFY_SOCKET", path)
	ch := make(chan string, 1000)
	go func() { // ends when the cleanup closes c
		buf := make([]byte, 4096)
		for {
			n, err := c.Read(buf)
			if err != nil {
				close(ch)
				return
			}
			ch <- string(buf[:n])
		}
	}()
	return ch
}
