package masterlink

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
	"google.golang.org/grpc"
)

// TestLinkParams: the gRPC channel's connection backoff, jitter included,
// stays within ReconnectMax (gRPC's default grows to 2 minutes), each
// attempt is bounded, the Client pings, and the master's enforcement
// policy permits those pings.
func TestLinkParams(t *testing.T) {
	for _, o := range []Options{{}, {ReconnectMin: 100 * time.Millisecond, ReconnectMax: 2 * time.Second, KeepaliveTime: 20 * time.Second, KeepaliveTimeout: time.Second}} {
		o.Master, o.StateDir, o.Runner = "127.0.0.1:1", t.TempDir(), nopRunner{}
		c, err := New(o)
		if err != nil {
			t.Fatal(err)
		}
		p := c.linkParams()
		bo := p.connect.Backoff
		if worst := time.Duration(float64(bo.MaxDelay) * (1 + bo.Jitter)); worst > c.opts.ReconnectMax || worst > 5*time.Second {
			t.Errorf("%+v: channel backoff up to %v, want ≤ ReconnectMax %v ≤ 5 s", o, worst, c.opts.ReconnectMax)
		}
		if bo.BaseDelay != c.opts.ReconnectMin || bo.Multiplier <= 1 || bo.Jitter <= 0 {
			t.Errorf("%+v: channel backoff %+v", o, bo)
		}
		if p.retry.Max != c.opts.ReconnectMax || p.retry.delay(100, 0) > c.opts.ReconnectMax || p.retry.Jitter <= 0 {
			t.Errorf("%+v: session retry %+v", o, p.retry)
		}
		if ct := p.connect.MinConnectTimeout; ct <= 0 || ct > 20*time.Second {
			t.Errorf("%+v: connect timeout %v", o, ct)
		}
		ka := p.keepalive
		if ka.Time != c.opts.KeepaliveTime || ka.Timeout != c.opts.KeepaliveTimeout || ka.Time <= 0 || ka.Timeout <= 0 {
			t.Errorf("%+v: keepalive %+v", o, ka)
		}
		if pol := serverEnforcement(); pol.MinTime > max(ka.Time, 10*time.Second) || pol.MinTime > 10*time.Second || !pol.PermitWithoutStream {
			t.Errorf("server enforcement %+v does not permit pings every %v", pol, ka.Time)
		}
	}
}

// logRecorder keeps the err attribute of every record, by message.
type logRecorder struct {
	mu   sync.Mutex
	errs map[string][]error
}

func (h *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (h *logRecorder) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	r.Attrs(func(a slog.Attr) bool {
		if err, ok := a.Value.Any().(error); ok && a.Key == "err" {
			h.errs[r.Message] = append(h.errs[r.Message], err)
		}
		return true
	})
	return nil
}
func (h *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *logRecorder) WithGroup(string) slog.Handler      { return h }

// mute is a master that accepts the stream and never answers the
// Register.
type mute struct {
	pb.UnimplementedAgentLinkServer
}

func (mute) Connect(stream pb.AgentLink_ConnectServer) error {
	<-stream.Context().Done()
	return nil
}

// TestRegisterTimeout: a session that does not register in time — no
// connection (a peer that never speaks HTTP/2) or a master that never
// answers — is logged and started again; the Client never waits forever.
func TestRegisterTimeout(t *testing.T) {
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var held []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		silent.Close()
		mu.Lock()
		for _, c := range held {
			c.Close()
		}
		mu.Unlock()
	})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer(ServerOptions()...)
	pb.RegisterAgentLinkServer(s, mute{})
	go func() { _ = s.Serve(l) }()
	t.Cleanup(s.Stop)

	for name, addr := range map[string]string{"silent peer": silent.Addr().String(), "mute master": l.Addr().String()} {
		t.Run(name, func(t *testing.T) {
			rec := &logRecorder{errs: map[string][]error{}}
			c, err := New(Options{Master: addr, StateDir: t.TempDir(), Runner: nopRunner{}, ReconnectMin: 10 * time.Millisecond,
				ReconnectMax: 50 * time.Millisecond, Log: slog.New(rec)})
			if err != nil {
				t.Fatal(err)
			}
			c.registerTimeout = 300 * time.Millisecond
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- c.Run(ctx) }()
			deadline := time.Now().Add(30 * time.Second)
			for {
				rec.mu.Lock()
				var timeouts int
				for _, err := range rec.errs["master link down"] {
					if errors.Is(err, errRegisterTimeout) {
						timeouts++
					}
				}
				rec.mu.Unlock()
				if timeouts >= 2 {
					break // given up, and again
				}
				if time.Now().After(deadline) {
					t.Fatalf("no registration timeout logged twice within 30 s: %v", rec.errs)
				}
				time.Sleep(20 * time.Millisecond)
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatalf("run: %v", err)
			}
		})
	}
}
