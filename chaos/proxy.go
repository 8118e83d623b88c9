package chaos

import (
	"errors"
	"net"
	"sync"
	"syscall"
	"time"
)

// Proxy forwards TCP connections from a loopback port to a target, and
// cuts links on demand, all of them or those of one owner (Owner names
// who opened each connection, e.g. which agent): Reset closes them and
// refuses new ones for a while; BlackHole keeps them open but forwards
// nothing (nor accepts anything new) for a while. Down closes the port
// and every connection until Up, so that the port refuses connections as
// a dead process's would. It is safe for concurrent use; Close stops it
// and waits for its goroutines.
type Proxy struct {
	addr   string
	target string
	// Owner names the client of an accepted connection ("" for one it
	// does not know). Nil: every connection is "". Set before traffic.
	Owner func(net.Conn) string

	mu        sync.Mutex
	l         net.Listener        // nil while down
	conns     map[net.Conn]string // both ends of each link → owner
	refuseTil map[string]time.Time
	holeTil   map[string]time.Time
	closed    bool
	wg        sync.WaitGroup
}

// NewProxy listens on a free loopback port and forwards to target.
func NewProxy(target string) (*Proxy, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{addr: l.Addr().String(), target: target, l: l, conns: map[net.Conn]string{},
		refuseTil: map[string]time.Time{}, holeTil: map[string]time.Time{}}
	p.wg.Add(1)
	go p.accept(l)
	return p, nil
}

// Addr is the address clients dial.
func (p *Proxy) Addr() string { return p.addr }

// Reset closes the connections of owner (every connection if owner is
// "") and refuses (accepts and closes at once) their new ones for d.
func (p *Proxy) Reset(owner string, d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refuseTil[owner] = time.Now().Add(d)
	for c, o := range p.conns {
		if owner == "" || o == owner {
			_ = c.Close()
		}
	}
}

// BlackHole stops forwarding the bytes of owner's connections (every
// connection if owner is "") in both directions, without closing
// anything, for d: like a cable pulled with no RST. Bytes are held, as
// TCP would retransmit them.
func (p *Proxy) BlackHole(owner string, d time.Duration) {
	p.mu.Lock()
	p.holeTil[owner] = time.Now().Add(d)
	p.mu.Unlock()
}

// Conns is the number of open links of owner (every link if owner is
// "").
func (p *Proxy) Conns(owner string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, o := range p.conns {
		if owner == "" || o == owner {
			n++
		}
	}
	return n / 2 // both ends of each link are tracked
}

// Down closes the listening port (connecting to it is refused) and every
// connection, until Up.
func (p *Proxy) Down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.l != nil {
		_ = p.l.Close()
		p.l = nil
	}
	for c := range p.conns {
		_ = c.Close()
	}
}

// Up listens on the proxy's address again (after Down; a no-op while
// up). Another process may have taken the port meanwhile: it retries
// for up to 5 s.
func (p *Proxy) Up() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.l != nil || p.closed {
		return nil
	}
	var err error
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var l net.Listener
		if l, err = net.Listen("tcp", p.addr); err == nil {
			p.l = l
			p.wg.Add(1)
			go p.accept(l)
			return nil
		}
		if !errors.Is(err, syscall.EADDRINUSE) || time.Now().After(deadline) {
			return err
		}
	}
}

// Close stops the proxy and waits for its goroutines.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.Down()
	p.wg.Wait()
}

func (p *Proxy) accept(l net.Listener) {
	defer p.wg.Done()
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

// serve links one accepted connection to the target, unless its owner's
// link is cut.
func (p *Proxy) serve(c net.Conn) {
	defer p.wg.Done()
	owner := ""
	if p.Owner != nil {
		owner = p.Owner(c)
	}
	p.wait(owner)
	p.mu.Lock()
	refuse := p.closed || time.Now().Before(p.refuseTil[owner]) || time.Now().Before(p.refuseTil[""])
	p.mu.Unlock()
	if refuse {
		_ = c.Close()
		return
	}
	up, err := net.DialTimeout("tcp", p.target, 2*time.Second)
	if err != nil {
		_ = c.Close()
		return
	}
	if !p.track(c, up, owner) {
		return
	}
	p.wg.Add(2)
	go p.pipe(c, up, owner)
	go p.pipe(up, c, owner)
}

// track registers both ends, or closes them when the proxy is down or
// closed.
func (p *Proxy) track(a, b net.Conn, owner string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.l == nil {
		_ = a.Close()
		_ = b.Close()
		return false
	}
	p.conns[a], p.conns[b] = owner, owner
	return true
}

// wait sleeps while a black hole on owner's links (or on every link)
// lasts, or until the proxy closes.
func (p *Proxy) wait(owner string) {
	for {
		p.mu.Lock()
		d := max(time.Until(p.holeTil[owner]), time.Until(p.holeTil[""]))
		closed := p.closed
		p.mu.Unlock()
		if d <= 0 || closed {
			return
		}
		time.Sleep(min(d, 50*time.Millisecond))
	}
}

func (p *Proxy) pipe(dst, src net.Conn, owner string) {
	defer p.wg.Done()
	defer func() {
		_ = dst.Close()
		_ = src.Close()
		p.mu.Lock()
		delete(p.conns, dst)
		delete(p.conns, src)
		p.mu.Unlock()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.wait(owner)
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
