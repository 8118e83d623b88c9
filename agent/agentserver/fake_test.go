package agentserver

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/brimnode/brim/agent"
	"github.com/brimnode/brim/isolator"
)

// fakeRuntime is an in-memory agent.Runtime under a real *agent.Agent
// (the core's own fake is internal to package agent). A container runs
// until finish or Kill ends it; Logs reads the stdout and stderr files of
// its sandbox.
type fakeRuntime struct {
	mu  sync.Mutex
	dir string
	cs  map[string]*fakeContainer
}

type fakeContainer struct {
	info   agent.RuntimeInfo
	limits isolator.Limits
	exit   chan struct{}
}

func newFakeRuntime(dir string) *fakeRuntime {
	return &fakeRuntime{dir: dir, cs: map[string]*fakeContainer{}}
}

func (f *fakeRuntime) Launch(_ context.Context, s agent.LaunchSpec) (*agent.RuntimeInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	sb := filepath.Join(f.dir, s.ID, "sandbox")
	if err := os.MkdirAll(sb, 0o700); err != nil {
		return nil, err
	}
	for _, n := range []string{"stdout", "stderr"} {
		if err := os.WriteFile(filepath.Join(sb, n), nil, 0o600); err != nil {
			return nil, err
		}
	}
	c := &fakeContainer{limits: s.Limits, exit: make(chan struct{}), info: agent.RuntimeInfo{
		ID: s.ID, Running: true, Pid: 1000 + len(f.cs), StartedAt: time.Now(), SandboxDir: sb,
		LogDir: filepath.Join(f.dir, s.ID, "log")}} // never made: Logs reads stdout, stderr
	f.cs[s.ID] = c
	in := c.info
	return &in, nil
}

// finish makes a running container exit with st.
func (f *fakeRuntime) finish(id string, st *agent.ExitStatus) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c := f.cs[id]; c != nil && c.info.Running {
		st.FinishedAt = time.Now()
		c.info.Running, c.info.Exit = false, st
		close(c.exit)
	}
}

func (f *fakeRuntime) get(id string) (*fakeContainer, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c := f.cs[id]; c != nil {
		return c, nil
	}
	return nil, fmt.Errorf("fake %s: %w", id, agent.ErrNotFound)
}

func (f *fakeRuntime) Wait(ctx context.Context, id string) (*agent.ExitStatus, error) {
	c, err := f.get(id)
	if err != nil {
		return nil, err
	}
	select {
	case <-c.exit:
		st := *c.info.Exit
		return &st, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (f *fakeRuntime) Kill(_ context.Context, id string, _ time.Duration) error {
	if _, err := f.get(id); err != nil {
		return err
	}
	f.finish(id, &agent.ExitStatus{Code: 137, Signal: 9, Reason: "killed"})
	return nil
}

func (f *fakeRuntime) Update(_ context.Context, id string, l isolator.Limits) error {
	c, err := f.get(id)
	if err == nil {
		f.mu.Lock()
		c.limits = l
		f.mu.Unlock()
	}
	return err
}

func (f *fakeRuntime) Usage(_ context.Context, id string) (*isolator.Statistics, error) {
	c, err := f.get(id)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return &isolator.Statistics{Timestamp: time.Now(), HasMemory: true, MemLimitBytes: uint64(c.limits.MemoryBytes)}, nil
}

func (f *fakeRuntime) Destroy(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.cs, id)
	return os.RemoveAll(filepath.Join(f.dir, id))
}

func (f *fakeRuntime) Recover(context.Context) ([]*agent.RuntimeInfo, error) { return nil, nil }

// newAgent is a real agent on opts (StateDir and Resources filled in
// when empty), not started.
func newAgent(t *testing.T, opts agent.Options) *agent.Agent {
	t.Helper()
	if opts.StateDir == "" {
		opts.StateDir = t.TempDir()
	}
	if opts.Resources == (agent.Resources{}) {
		opts.Resources = agent.Resources{MilliCPUs: 1000, MemMiB: 1024}
	}
	a, err := agent.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}
