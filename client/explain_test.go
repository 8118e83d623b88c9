package client

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/brimnode/brim/internal/masteraddr"
)

func TestExplainTLS(t *testing.T) {
	ctx := context.Background()
	dial := errors.New("connection closed")
	tlsSrv := httptest.NewTLSServer(http.NotFoundHandler())
	defer tlsSrv.Close()
	plain := httptest.NewServer(http.NotFoundHandler())
	defer plain.Close()

	explain := ExplainTLS(strings.TrimPrefix(tlsSrv.URL, "https://"))
	for range 2 { // probed once, the answer kept
		if err := explain(ctx, dial); !errors.Is(err, ErrServesTLS) || !errors.Is(err, dial) {
			t.Errorf("TLS master: %v", err)
		}
	}
	if err := ExplainTLS(strings.TrimPrefix(plain.URL, "http://"))(ctx, dial); err != dial {
		t.Errorf("plain master: %v, want the error unchanged", err)
	}
}

// TestExplainTLSLeavesAnswersAlone: a failure that is an answer (the
// watch found another leader and the master in use silent) is returned
// at once, without a probe: a probe of that master, frozen, held brim
// run's frameworks on it for 5 s after they had found the new leader
// (make chaos, master-stop of the first listed master). The frozen
// master is a listener that accepts and never answers.
func TestExplainTLSLeavesAnswersAlone(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 10)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	moved := &masteraddr.LeaderMovedError{Leader: "127.0.0.1:1", From: ln.Addr().String(), Why: context.DeadlineExceeded}
	explain := ExplainTLS(ln.Addr().String())
	if err := explain(context.Background(), moved); err != error(moved) {
		t.Fatalf("a leader move: %v, want it unchanged", err)
	}
	select {
	case c := <-accepted:
		c.Close()
		t.Fatal("a leader move probed the master it left")
	default:
	}
	// Another failure probes it, once, and a master that never answers
	// the handshake is no TLS master.
	dial := errors.New("connection closed")
	if err := explain(context.Background(), dial); err != dial {
		t.Fatalf("a frozen master: %v, want the error unchanged", err)
	}
	select {
	case c := <-accepted:
		c.Close()
	default:
		t.Fatal("a failure that may be a TLS mismatch was not probed")
	}
}
