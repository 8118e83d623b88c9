package transport_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/brimnode/brim/master/transport"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// serveTest serves srv on a loopback port until the test ends and returns
// its address.
func serveTest(t *testing.T, srv *transport.Server) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ctx, l) }()
	t.Cleanup(func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return l.Addr().String()
}

// decoding is a handler like the master's: it reads the whole body and
// answers 400 when that fails.
var decoding = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "read body: "+err.Error(), http.StatusBadRequest)
		return
	}
	fmt.Fprintf(w, "got %d bytes", len(b))
})

func healthServer() *grpc.Server {
	gs := grpc.NewServer()
	healthpb.RegisterHealthServer(gs, health.NewServer())
	return gs
}

// TestServeOnePort: gRPC and HTTP/1.1 clients share the port.
func TestServeOnePort(t *testing.T) {
	addr := serveTest(t, &transport.Server{GRPC: healthServer(), HTTP: decoding})
	resp, err := http.Post("http://"+addr+"/x", "text/plain", strings.NewReader("hello"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(b) != "got 5 bytes" {
		t.Fatalf("POST: %s %q", resp.Status, b)
	}
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	hr, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil || hr.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("gRPC health check: %v, %v", hr, err)
	}
}

// TestServeBodyTimeout: connections that announce a body and never send
// it are answered 408 and closed once the read timeout passes, all of
// them, and the server still answers afterwards. (Before, the master's
// http.Server had only a ReadHeaderTimeout: they were held until the
// client gave up.)
func TestServeBodyTimeout(t *testing.T) {
	addr := serveTest(t, &transport.Server{GRPC: healthServer(), HTTP: decoding, ReadTimeout: 2 * time.Second}) // long enough for a loaded host to read 500 headers
	const conns = 3000
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		bad  []string
		fail = func(s string) { mu.Lock(); bad = append(bad, s); mu.Unlock() }
	)
	sem := make(chan struct{}, 500) // stay under the file limit
	for i := 0; i < conns; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			c, err := net.Dial("tcp", addr)
			if err != nil {
				fail(err.Error())
				return
			}
			defer c.Close()
			// Only bounds a hung test; no timing is asserted.
			_ = c.SetDeadline(time.Now().Add(2 * time.Minute))
			if _, err := io.WriteString(c, "POST /reserve HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"); err != nil {
				fail(err.Error())
				return
			}
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				fail("read response: " + err.Error())
				return
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusRequestTimeout {
				fail(resp.Status)
				return
			}
			if _, err := c.Read(make([]byte, 1)); err != io.EOF {
				fail(fmt.Sprintf("connection not closed after 408: %v", err))
			}
		}()
	}
	wg.Wait()
	if len(bad) > 0 {
		t.Fatalf("%d of %d connections not answered 408 and closed, e.g. %s", len(bad), conns, bad[0])
	}
	resp, err := http.Post("http://"+addr+"/x", "text/plain", strings.NewReader("after"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST after the slow clients: %s", resp.Status)
	}
}

// TestServeSilentConnection: a connection that sends nothing is closed
// after the peek timeout, holding nothing.
func TestServeSilentConnection(t *testing.T) {
	addr := serveTest(t, &transport.Server{GRPC: healthServer(), HTTP: decoding, PeekTimeout: 200 * time.Millisecond})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Minute))
	if n, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("silent connection: read %d, %v; want EOF", n, err)
	}
}

// TestServeStops: Serve returns nil once ctx ends, and the port is closed.
func TestServeStops(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- (&transport.Server{GRPC: healthServer(), HTTP: decoding}).Serve(ctx, l) }()
	cancel()
	if err := <-errc; err != nil {
		t.Fatalf("Serve after cancel: %v", err)
	}
	if c, err := net.Dial("tcp", l.Addr().String()); err == nil {
		c.Close()
		t.Fatal("port still open after Serve returned")
	}
}
