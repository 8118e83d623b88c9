package chaos

import (
	"bufio"
	"io"
	"net"
	"sync"
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
	p.BlackHole("", 300*time.Millisecond)
	roundTrip(t, c, r, "held")

	// A reset closes the connection and refuses new ones while it lasts.
	p.Reset("", time.Hour)
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
	p.Reset("", 0)
	c3, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	roundTrip(t, c3, bufio.NewReader(c3), "again")
}

// TestProxyOwners: a cut aimed at one owner's connections leaves the
// others' alone, and Down makes the port refuse connections until Up.
func TestProxyOwners(t *testing.T) {
	p, err := NewProxy(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var mu sync.Mutex
	owners := map[string]string{} // client's local address → owner
	// The proxy may accept before dial below has noted the owner: wait
	// for it.
	p.Owner = func(c net.Conn) string {
		for range 100 {
			mu.Lock()
			o, ok := owners[c.RemoteAddr().String()]
			mu.Unlock()
			if ok {
				return o
			}
			time.Sleep(10 * time.Millisecond)
		}
		return ""
	}
	dial := func(owner string) (net.Conn, *bufio.Reader) {
		t.Helper()
		d := net.Dialer{}
		c, err := d.Dial("tcp", p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		mu.Lock()
		owners[c.LocalAddr().String()] = owner
		mu.Unlock()
		return c, bufio.NewReader(c)
	}
	a, ra := dial("a")
	b, rb := dial("b")
	roundTrip(t, a, ra, "a1")
	roundTrip(t, b, rb, "b1")
	if n := p.Conns("a"); n != 1 {
		t.Fatalf("Conns(a) = %d, want 1", n)
	}

	// b's black hole holds b's bytes; a's still flow.
	p.BlackHole("b", time.Hour)
	if _, err := b.Write([]byte("held\n")); err != nil {
		t.Fatal(err)
	}
	roundTrip(t, a, ra, "a2")
	_ = b.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if got, err := rb.ReadString('\n'); err == nil {
		t.Fatalf("b read %q through its black hole", got)
	}
	p.BlackHole("b", 0)
	_ = b.SetReadDeadline(time.Time{})
	if got, err := rb.ReadString('\n'); err != nil || got != "held\n" {
		t.Fatalf("b's held bytes after its black hole: %q, %v", got, err)
	}

	// a's reset closes a's connection and refuses a's new ones; b's
	// link is untouched.
	p.Reset("a", time.Hour)
	if _, err := ra.ReadString('\n'); err == nil {
		t.Fatal("a read after its reset")
	}
	a2, ra2 := dial("a")
	if _, err := ra2.ReadString('\n'); err == nil {
		t.Fatal("a's new connection during its reset was served")
	}
	a2.Close()
	roundTrip(t, b, rb, "b2")

	// Down: refused; Up: served again.
	p.Down()
	if c, err := net.Dial("tcp", p.Addr()); err == nil {
		c.Close()
		t.Fatal("dial of a proxy that is down succeeded")
	}
	if err := p.Up(); err != nil {
		t.Fatal(err)
	}
	c, rc := dial("c")
	roundTrip(t, c, rc, "c1")
}
