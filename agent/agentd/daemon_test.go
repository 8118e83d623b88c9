package agentd

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/brimnode/brim/agent"
	"github.com/brimnode/brim/isolator"
)

// emptyRuntime is a fake runtime with no containers: enough for an agent
// that recovers nothing and serves its local API.
type emptyRuntime struct{}

var errEmpty = errors.New("empty runtime")

func (emptyRuntime) Launch(context.Context, agent.LaunchSpec) (*agent.RuntimeInfo, error) {
	return nil, errEmpty
}
func (emptyRuntime) Wait(context.Context, string) (*agent.ExitStatus, error) { return nil, errEmpty }
func (emptyRuntime) Kill(context.Context, string, time.Duration) error       { return errEmpty }
func (emptyRuntime) Update(context.Context, string, isolator.Limits) error   { return errEmpty }
func (emptyRuntime) Usage(context.Context, string) (*isolator.Statistics, error) {
	return nil, errEmpty
}
func (emptyRuntime) Destroy(context.Context, string) error { return errEmpty }
func (emptyRuntime) Recover(context.Context) ([]*agent.RuntimeInfo, error) {
	return nil, nil
}

// TestOneFailingServerStopsTheOthers: when the metrics server fails, the
// agent's local API stops too (its socket is removed) and serve returns
// the metrics server's error instead of serving on half-alive.
func TestOneFailingServerStopsTheOthers(t *testing.T) {
	dir := t.TempDir()
	a, err := agent.New(agent.Options{StateDir: filepath.Join(dir, "state"), Runtime: emptyRuntime{},
		Resources: agent.Resources{MilliCPUs: 1000, MemMiB: 512}})
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "agent.sock")
	l, err := agent.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	ml, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ml.Close() // its Serve fails at once
	m := &metricsServer{l: ml, srv: &http.Server{ReadHeaderTimeout: time.Second}}
	d := &Daemon{cfg: DefaultConfig(), log: slog.New(slog.DiscardHandler)}
	err = d.serve(context.Background(), a, l, m, nil, make(chan os.Signal))
	if err == nil || !errors.Is(err, net.ErrClosed) {
		t.Fatalf("serve: %v, want the metrics server's error", err)
	}
	if _, err := os.Stat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the agent's socket after the metrics server failed: %v (want it removed: the agent stopped)", err)
	}
}

// TestServeStopsWithContext: ending the context stops every server and
// serve returns nil.
func TestServeStopsWithContext(t *testing.T) {
	dir := t.TempDir()
	a, err := agent.New(agent.Options{StateDir: filepath.Join(dir, "state"), Runtime: emptyRuntime{},
		Resources: agent.Resources{MilliCPUs: 1000, MemMiB: 512}})
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "agent.sock")
	l, err := agent.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	ml, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := &metricsServer{l: ml, srv: &http.Server{ReadHeaderTimeout: time.Second}}
	d := &Daemon{cfg: DefaultConfig(), log: slog.New(slog.DiscardHandler)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.serve(ctx, a, l, m, nil, make(chan os.Signal)) }()
	<-a.Ready()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve after the context ended: %v", err)
	}
	if _, err := os.Stat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket after shutdown: %v", err)
	}
	if _, err := net.Dial("tcp", ml.Addr().String()); err == nil {
		t.Error("metrics server still accepts after shutdown")
	}
}
