package agentd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/brimnode/brim/agent"
	"github.com/brimnode/brim/agent/agentserver"
	"github.com/brimnode/brim/isolator"
	"github.com/brimnode/brim/monitor"
	"github.com/brimnode/brim/qos"
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
	l, err := agentserver.Listen(sock)
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
	l, err := agentserver.Listen(sock)
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

// TestReloadSwapsPlugins: a reload opens the estimator and QoS controller
// the file now names and swaps them into the running agent, all or
// nothing: a new principal, or a plugin that does not open, leaves every
// setting in force (the log level included); the secret is rotated.
func TestReloadSwapsPlugins(t *testing.T) {
	dir := t.TempDir()
	c := DefaultConfig()
	c.StateDir, c.Socket, c.Resources, c.ConfigFile = filepath.Join(dir, "state"), filepath.Join(dir, "a.sock"), "cpus:1;mem:512", "/etc/brim/agent.toml"
	c.Oversub.Estimator, c.Oversub.EstimatorOpts = "fixed", []string{"resources=cpus:1;mem:128"}
	c.Link.Principal, c.Link.Secret = "agent1", "old"
	next := Reloadable{}
	deps := testDeps()
	deps.Reload = func() (Reloadable, error) { return next, nil }
	d, err := New(c, deps)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	a, err := agent.New(agent.Options{StateDir: c.StateDir, Runtime: emptyRuntime{}, Resources: agent.Resources{MilliCPUs: 1000, MemMiB: 512},
		Oversub: &agent.Oversub{Host: monitor.NoHost, Estimator: d.plugins.est, EstimatorName: "fixed", Controller: d.plugins.ctrl, QoSName: "noop",
			MonitorInterval: time.Hour, EstimatorInterval: time.Hour, QoSInterval: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	d.plugins.agent = a
	d.plugins.ioLimits = func() error { return fmt.Errorf("no disk to throttle: %w", qos.ErrNotSupported) }
	l, err := agentserver.Listen(filepath.Join(dir, "a.sock"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- agentserver.Serve(ctx, a, l, agentserver.Options{}) }()
	t.Cleanup(func() { cancel(); <-served })
	<-a.Ready()
	names := func() (string, string) {
		st, _ := a.Oversubscription()
		return st.Estimator, st.QoS
	}

	deps.Level.Set(slog.LevelInfo)
	plugins := &PluginConfig{Estimator: "fixed", EstimatorOpts: []string{"resources=cpus:1;mem:128"}, QoS: "noop"}
	for _, bad := range []Reloadable{
		{LogLevel: "debug", Principal: "agent2", Plugins: plugins},
		{LogLevel: "debug", Principal: "agent1", Plugins: &PluginConfig{Estimator: "fixed", EstimatorOpts: []string{"resources=lots"}, QoS: "interference"}},
		{LogLevel: "debug", Plugins: &PluginConfig{Estimator: "usage", QoS: "nosuch"}},
		// io throttling on an agent whose cgroups cannot (ioLimits below)
		{LogLevel: "debug", Plugins: &PluginConfig{Estimator: "fixed", EstimatorOpts: []string{"resources=cpus:1;mem:128"}, QoS: "interference", QoSOpts: []string{"io-throttle=1048576"}}},
	} {
		next = bad
		d.reload(ctx)
		if est, ctrl := names(); est != "fixed" || ctrl != "noop" || deps.Level.Level() != slog.LevelInfo || d.secret.Get() != "old" {
			t.Errorf("after the bad reload %+v: estimator %s, qos %s, level %s, secret %q; want all kept", bad, est, ctrl, deps.Level.Level(), d.secret.Get())
		}
	}
	oldEst := d.plugins.est
	next = Reloadable{LogLevel: "debug", Principal: "agent1", Secret: "new",
		Plugins: &PluginConfig{Estimator: "fixed", EstimatorOpts: []string{"resources=cpus:0.5;mem:64"}, QoS: "interference", QoSOpts: []string{"warmup=3"}}}
	d.reload(ctx)
	if est, ctrl := names(); est != "fixed" || ctrl != "interference" || deps.Level.Level() != slog.LevelDebug || d.secret.Get() != "new" {
		t.Fatalf("after the reload: estimator %s, qos %s, level %s, secret %q", est, ctrl, deps.Level.Level(), d.secret.Get())
	}
	if d.plugins.est == oldEst || d.plugins.cfg.EstimatorOpts[0] != "resources=cpus:0.5;mem:64" {
		t.Fatalf("the estimator with new options was not opened anew: %+v", d.plugins.cfg)
	}
	// The same plugins again: nothing is reopened.
	kept := d.plugins.est
	d.reload(ctx)
	if d.plugins.est != kept {
		t.Error("an unchanged estimator was opened again")
	}
}
