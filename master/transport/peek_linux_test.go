package transport

import (
	"io"
	"net"
	"testing"
	"time"
)

// TestRouteHandsOnTCPConn: a gRPC connection is handed on as the
// *net.TCPConn it is (gRPC then reads it into pooled buffers), its
// preface unconsumed.
func TestRouteHandsOnTCPConn(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sp := newSplitListener(l, 5*time.Second)
	errc := make(chan error, 1)
	go func() { errc <- sp.run() }()
	defer func() {
		sp.Close()
		<-errc
	}()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, http2Preface+"more"); err != nil {
		t.Fatal(err)
	}
	got, err := sp.grpc.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer got.Close()
	if _, ok := got.(*net.TCPConn); !ok {
		t.Fatalf("handed on a %T, want *net.TCPConn", got)
	}
	b := make([]byte, len(http2Preface)+4)
	if _, err := io.ReadFull(got, b); err != nil || string(b) != http2Preface+"more" {
		t.Fatalf("read %q, %v; want the preface and what follows", b, err)
	}
}
