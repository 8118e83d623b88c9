package transport

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
)

// Defaults of Server's timeouts.
const (
	// DefaultPeekTimeout bounds the wait for a connection's first bytes
	// (and its TLS handshake under TLS).
	DefaultPeekTimeout = 10 * time.Second
	// DefaultReadTimeout bounds reading one HTTP request, header and body.
	DefaultReadTimeout = 30 * time.Second
	// DefaultIdleTimeout closes an idle keep-alive HTTP connection.
	DefaultIdleTimeout = 2 * time.Minute
)

// Server serves the master's gRPC services and its HTTP API on one
// listener, like Mesos's 5050: connections that open with the HTTP/2
// preface (gRPC clients: agents, frameworks) go to the gRPC server on its
// own transport; the others (HTTP/1.1: operators, curl) to the HTTP API.
// grpc.Server.ServeHTTP would need no sniffing but costs ~100 KiB per
// stream: 2 GiB at 20,000 agents.
//
// Under TLS (l a tls.Listener) the first bytes are read after the
// handshake, whose ALPN choice must suit the protocol that follows (see
// cmd/brim/tls.go).
//
// A Server is used once: set its fields, then call Serve.
type Server struct {
	// GRPC serves the gRPC connections (API.RegisterGRPC's services).
	GRPC *grpc.Server
	// HTTP is the HTTP API (API.Handler, or a Gate).
	HTTP http.Handler
	// PeekTimeout, ReadTimeout and IdleTimeout default to the Default…
	// constants. A request whose header or body is not received within
	// ReadTimeout ends its connection; a late body is answered 408.
	PeekTimeout, ReadTimeout, IdleTimeout time.Duration
}

// Serve serves l until ctx ends or a server fails, then stops both
// servers (in-flight HTTP requests get up to 5 s) and closes l. It returns
// the first server's error, nil after ctx ends.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	peek, read, idle := orDefault(s.PeekTimeout, DefaultPeekTimeout), orDefault(s.ReadTimeout, DefaultReadTimeout),
		orDefault(s.IdleTimeout, DefaultIdleTimeout)
	sp := newSplitListener(l, peek)
	hs := &http.Server{Handler: bodyTimeout(s.HTTP), ReadHeaderTimeout: read, ReadTimeout: read, IdleTimeout: idle}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return ignoreClosed(sp.run()) })
	g.Go(func() error { return ignoreClosed(s.GRPC.Serve(sp.grpc)) })
	g.Go(func() error { return ignoreClosed(hs.Serve(sp.http)) })
	g.Go(func() error {
		<-gctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = sp.Close() // run reports the listener's end
		s.GRPC.Stop()
		_ = hs.Shutdown(sctx)
		_ = hs.Close() // after Shutdown: only connections it could not drain
		return nil
	})
	return g.Wait()
}

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

func ignoreClosed(err error) error {
	if err == nil || errors.Is(err, http.ErrServerClosed) || errors.Is(err, grpc.ErrServerStopped) || errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// bodyTimeout answers 408 to a request whose body did not arrive within
// the server's ReadTimeout, whatever the handler makes of the failed read.
// The connection is closed after it (net/http never reuses it).
func bodyTimeout(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tb := &timeoutBody{ReadCloser: r.Body}
		r.Body = tb
		tw := &timeoutWriter{ResponseWriter: w, body: tb}
		h.ServeHTTP(tw, r)
		if tb.timedOut.Load() {
			tw.write408()
		}
	})
}

// timeoutBody notes a read that failed for the read deadline.
type timeoutBody struct {
	io.ReadCloser
	timedOut atomic.Bool
}

func (b *timeoutBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	var ne net.Error
	if err != nil && errors.As(err, &ne) && ne.Timeout() {
		b.timedOut.Store(true)
	}
	return n, err
}

// timeoutWriter replaces the handler's answer with 408 once the body
// timed out.
type timeoutWriter struct {
	http.ResponseWriter
	body    *timeoutBody
	once    sync.Once
	written bool // the handler's own header went out
}

func (w *timeoutWriter) write408() {
	w.once.Do(func() {
		if w.written {
			return
		}
		w.ResponseWriter.Header().Set("Connection", "close")
		http.Error(w.ResponseWriter, "request body not received in time", http.StatusRequestTimeout)
	})
}

func (w *timeoutWriter) WriteHeader(code int) {
	if w.body.timedOut.Load() {
		w.write408()
		return
	}
	w.once.Do(func() {
		w.written = true
		w.ResponseWriter.WriteHeader(code)
	})
}

func (w *timeoutWriter) Write(p []byte) (int, error) {
	if w.body.timedOut.Load() {
		w.write408()
		return len(p), nil
	}
	w.WriteHeader(http.StatusOK)
	return w.ResponseWriter.Write(p)
}

// http2Preface opens every HTTP/2 connection with prior knowledge.
const http2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// splitListener sorts a listener's connections by their first bytes: the
// HTTP/2 preface to grpc, anything else to http. Close closes all three.
type splitListener struct {
	l          net.Listener
	peek       time.Duration
	grpc, http *chanListener
	done       chan struct{}
	once       sync.Once
}

func newSplitListener(l net.Listener, peek time.Duration) *splitListener {
	done := make(chan struct{})
	return &splitListener{l: l, peek: peek, done: done,
		grpc: &chanListener{ch: make(chan net.Conn), done: done, addr: l.Addr()},
		http: &chanListener{ch: make(chan net.Conn), done: done, addr: l.Addr()}}
}

func (s *splitListener) Close() error {
	s.once.Do(func() { close(s.done) })
	return s.l.Close()
}

// run accepts until the listener fails or is closed; it returns the
// accept error. The route goroutines end within the peek timeout or when
// their connection is handed on or the listener closed.
func (s *splitListener) run() error {
	for {
		c, err := s.l.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			_ = s.Close() // returning the accept error
			return err
		}
		go s.route(c)
	}
}

// route peeks at a connection's first bytes (bounded by a deadline so a
// silent client holds nothing) and hands it on.
func (s *splitListener) route(c net.Conn) {
	_ = c.SetReadDeadline(time.Now().Add(s.peek))
	if head, ok := peekTCP(c, len(http2Preface)); ok && string(head) == http2Preface {
		_ = c.SetReadDeadline(time.Time{})
		s.handOn(s.grpc, c) // unwrapped: see peekTCP
		return
	}
	br := bufio.NewReaderSize(c, len(http2Preface))
	// Only a connection starting with "P" (the preface, or POST) needs
	// more than one byte to decide; every HTTP/1.1 request is longer than
	// the preface.
	head, err := br.Peek(1)
	if err == nil && head[0] == http2Preface[0] {
		head, err = br.Peek(len(http2Preface))
	}
	_ = c.SetReadDeadline(time.Time{})
	to := s.http
	if err == nil && string(head) == http2Preface {
		to = s.grpc
	} else if len(head) == 0 {
		c.Close()
		return
	}
	s.handOn(to, &peekedConn{Conn: c, r: br})
}

// handOn gives c to l's Accept, or closes it once the listener is closed.
func (s *splitListener) handOn(l *chanListener, c net.Conn) {
	select {
	case l.ch <- c:
	case <-s.done:
		c.Close()
	}
}

// peekedConn reads first what was peeked.
type peekedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *peekedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// chanListener is a net.Listener fed by splitListener.
type chanListener struct {
	ch   chan net.Conn
	done chan struct{}
	addr net.Addr
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) Close() error   { return nil } // the splitListener owns the socket
func (l *chanListener) Addr() net.Addr { return l.addr }
