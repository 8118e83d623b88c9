package chaos

import (
	"net"
	"sync"
	"time"
)

// Proxy forwards TCP connections from a loopback port to a target, and
// cuts the link on demand: Reset closes every connection and refuses new
// ones for a while; BlackHole keeps connections open but forwards nothing
// (nor accepts anything new) for a while. It is safe for concurrent use;
// Close stops it and closes every connection.
type Proxy struct {
	l      net.Listener
	target string

	mu        sync.Mutex
	conns     map[net.Conn]struct{}
	refuseTil time.Time
	holeTil   time.Time
	closed    bool
	wg        sync.WaitGroup
}

// NewProxy listens on a free loopback port and forwards to target.
func NewProxy(target string) (*Proxy, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{l: l, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the address clients dial.
func (p *Proxy) Addr() string { return p.l.Addr().String() }

// Reset closes every connection and refuses (accepts and closes at once)
// new ones for d.
func (p *Proxy) Reset(d time.Duration) {
	p.mu.Lock()
	p.refuseTil = time.Now().Add(d)
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
}

// BlackHole stops forwarding bytes in both directions, without closing
// anything, for d: like a cable pulled with no RST.
func (p *Proxy) BlackHole(d time.Duration) {
	p.mu.Lock()
	p.holeTil = time.Now().Add(d)
	p.mu.Unlock()
}

// Close stops the proxy and waits for its goroutines.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	_ = p.l.Close()
	p.wg.Wait()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		p.wait(func() time.Time { return p.holeTil })
		p.mu.Lock()
		refuse := time.Now().Before(p.refuseTil) || p.closed
		p.mu.Unlock()
		if refuse {
			_ = c.Close()
			continue
		}
		up, err := net.DialTimeout("tcp", p.target, 2*time.Second)
		if err != nil {
			_ = c.Close()
			continue
		}
		if !p.track(c, up) {
			continue
		}
		p.wg.Add(2)
		go p.pipe(c, up)
		go p.pipe(up, c)
	}
}

// track registers both ends, or closes them when the proxy is closed.
func (p *Proxy) track(a, b net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		_ = a.Close()
		_ = b.Close()
		return false
	}
	p.conns[a], p.conns[b] = struct{}{}, struct{}{}
	return true
}

// wait sleeps while the black hole lasts (or until the proxy closes).
func (p *Proxy) wait(til func() time.Time) {
	for {
		p.mu.Lock()
		d := time.Until(til())
		closed := p.closed
		p.mu.Unlock()
		if d <= 0 || closed {
			return
		}
		time.Sleep(min(d, 50*time.Millisecond))
	}
}

func (p *Proxy) pipe(dst, src net.Conn) {
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
			p.wait(func() time.Time { return p.holeTil })
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
