package chaos

import (
	"bufio"
	"io"
	"net"
	"testing"
	"time"
)

// echoServer echoes every line back until the listener closes.
func echoServer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	return l.Addr().String()
}

func roundTrip(t *testing.T, c net.Conn, r *bufio.Reader, msg string) {
	t.Helper()
	if _, err := c.Write([]byte(msg + "\n")); err != nil {
		t.Fatal(err)
	}
	got, err := r.ReadString('\n')
	if err != nil || got != msg+"\n" {
		t.Fatalf("echo of %q: %q, %v", msg, got, err)
	}
}

func TestProxy(t *testing.T) {
	p, err := NewProxy(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	roundTrip(t, c, r, "hello")

	// A black hole holds bytes without closing; they arrive after it.
	p.BlackHole(300 * time.Millisecond)
	roundTrip(t, c, r, "held")

	// A reset closes the connection and refuses new ones while it lasts.
	p.Reset(time.Hour)
	if _, err := r.ReadString('\n'); err == nil {
		t.Fatal("read after a reset succeeded")
	}
	c2, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if _, err := bufio.NewReader(c2).ReadString('\n'); err == nil {
		t.Fatal("a connection during a reset was served")
	}
	p.Reset(0)
	c3, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	roundTrip(t, c3, bufio.NewReader(c3), "again")
}
