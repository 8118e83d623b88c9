package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/brimnode/brim/isolator"
)

// fakeRuntime is an in-memory Runtime for the agent's pure logic. The
// real containerizer is exercised by the integration tests.
type fakeRuntime struct {
	mu         sync.Mutex
	dir        string
	containers map[string]*fakeContainer
	launchErr  error
	destroyed  []string
	// heldKills, when set, receives the id of every Kill, which then
	// leaves the container running until the test finishes it.
	heldKills chan string
	// cgroupPath, when set, is every launch's RuntimeInfo.CgroupPath (a
	// container made from a warm sandbox on cgroup v2).
	cgroupPath string
}

type fakeContainer struct {
	spec   LaunchSpec
	info   RuntimeInfo
	limits isolator.Limits
	exit   chan struct{}
	status *ExitStatus
}

func newFakeRuntime(dir string) *fakeRuntime {
	return &fakeRuntime{dir: dir, containers: map[string]*fakeContainer{}}
}

func (f *fakeRuntime) Launch(_ context.Context, s LaunchSpec) (*RuntimeInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.launchErr != nil {
		return nil, f.launchErr
	}
	if _, ok := f.containers[s.ID]; ok {
		return nil, fmt.Errorf("launch %s: exists", s.ID)
	}
	// The containerizer's layout: the sandbox and the log side by side.
	sb, log := filepath.Join(f.dir, s.ID, "sandbox"), filepath.Join(f.dir, s.ID, "log")
	for _, d := range []struct{ kept, to string }{{s.Sandbox, sb}, {s.LogDir, log}} {
		if d.kept == "" { // a restart's are moved into place, as the containerizer does
			continue
		}
		if err := os.MkdirAll(filepath.Dir(d.to), 0o700); err != nil {
			return nil, err
		}
		if err := os.Rename(d.kept, d.to); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(sb, 0o700); err != nil {
		return nil, err
	}
	for _, n := range []string{"stdout", "stderr"} {
		f, err := os.OpenFile(filepath.Join(sb, n), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return nil, err
		}
		f.Close()
	}
	c := &fakeContainer{
		spec: s,
		info: RuntimeInfo{ID: s.ID, Running: true, Pid: 1000 + len(f.containers), StartedAt: time.Now(), SandboxDir: sb,
			LogDir: log, CgroupPath: f.cgroupPath}, // made by a test that writes a log; without it: stdout, stderr
		limits: s.Limits,
		exit:   make(chan struct{}),
	}
	f.containers[s.ID] = c
	in := c.info
	return &in, nil
}

// finish makes a running container exit with code.
func (f *fakeRuntime) finish(id string, st *ExitStatus) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.containers[id]
	if c == nil || !c.info.Running {
		return
	}
	st.FinishedAt = time.Now()
	c.info.Running, c.status, c.info.Exit = false, st, st
	close(c.exit)
}

func (f *fakeRuntime) get(id string) (*fakeContainer, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.containers[id]
	if c == nil {
		return nil, fmt.Errorf("fake %s: %w", id, ErrNotFound)
	}
	return c, nil
}

func (f *fakeRuntime) Wait(ctx context.Context, id string) (*ExitStatus, error) {
	c, err := f.get(id)
	if err != nil {
		return nil, err
	}
	select {
	case <-c.exit:
		st := *c.status
		return &st, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (f *fakeRuntime) Kill(_ context.Context, id string, grace time.Duration) error {
	c, err := f.get(id)
	if err != nil {
		return err
	}
	if !c.info.Running {
		return ErrNotRunning
	}
	if f.heldKills != nil {
		f.heldKills <- id
		return nil
	}
	f.finish(id, &ExitStatus{Code: 137, Signal: 9, Reason: "killed", Message: fmt.Sprint("grace ", grace)})
	return nil
}

func (f *fakeRuntime) Update(_ context.Context, id string, l isolator.Limits) error {
	c, err := f.get(id)
	if err != nil {
		return err
	}
	f.mu.Lock()
	c.limits = l
	f.mu.Unlock()
	return nil
}

func (f *fakeRuntime) Usage(_ context.Context, id string) (*isolator.Statistics, error) {
	c, err := f.get(id)
	if err != nil {
		return nil, err
	}
	return &isolator.Statistics{Timestamp: time.Now(), HasMemory: true, MemLimitBytes: uint64(c.limits.MemoryBytes)}, nil
}

func (f *fakeRuntime) Destroy(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.containers[id] == nil {
		return fmt.Errorf("fake %s: %w", id, ErrNotFound)
	}
	delete(f.containers, id)
	f.destroyed = append(f.destroyed, id)
	return os.RemoveAll(filepath.Join(f.dir, id))
}

func (f *fakeRuntime) Recover(context.Context) ([]*RuntimeInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*RuntimeInfo
	for _, c := range f.containers {
		in := c.info
		out = append(out, &in)
	}
	return out, nil
}
