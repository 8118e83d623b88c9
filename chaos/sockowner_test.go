//go:build linux

package chaos

import (
	"net"
	"os"
	"testing"
)

// TestConnPid: the process holding the client end of an accepted
// loopback connection is found among the candidates, and no other.
func TestConnPid(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := connPid(s, []int{1, os.Getpid()}); got != os.Getpid() {
		t.Fatalf("connPid = %d, want this process %d", got, os.Getpid())
	}
	if got := connPid(s, []int{1}); got != 0 {
		t.Fatalf("connPid among others = %d, want 0", got)
	}
}
