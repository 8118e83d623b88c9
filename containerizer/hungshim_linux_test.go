package containerizer

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/brimnode/brim/executor"
	"github.com/brimnode/brim/internal/testutil"
	"github.com/brimnode/brim/isolator"
)

// hungBound bounds every call these tests make: the fixed code answers
// within a few ShimTimeouts (1 s here); the old code hung for ever, and
// the bound turns that into a failure that reports instead.
const hungBound = time.Minute

// stopShim SIGSTOPs the shim of info (a process this test's containerizer
// started) and resumes it on cleanup if it is still that shim.
func stopShim(t *testing.T, e *netEnv, info *Info) {
	t.Helper()
	dir := filepath.Join(e.stateDir, "containers", info.ID)
	if !shimAlive(info.ShimPid, dir) {
		t.Fatalf("shim %d of %s not running", info.ShimPid, info.ID)
	}
	if err := syscall.Kill(info.ShimPid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if shimAlive(info.ShimPid, dir) {
			_ = syscall.Kill(info.ShimPid, syscall.SIGCONT)
		}
	})
}

// restart drops the containerizer and the network isolator as an agent
// restart does (containers keep running) and makes new ones.
func (e *netEnv) restart() *Containerizer {
	e.t.Helper()
	_ = e.c.Close()
	_ = e.net.Close()
	return e.start()
}

// checkEscalated checks that info's container ended with
// ReasonShimUnresponsive: its shim and init gone, no process left in its
// cgroup, its address given back.
func checkEscalated(t *testing.T, e *netEnv, c *Containerizer, info *Info) {
	t.Helper()
	got, err := c.Get(context.Background(), info.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != StateExited || got.Exit == nil || got.Exit.Reason != ReasonShimUnresponsive {
		t.Fatalf("container of the hung shim: state %s, exit %+v; want exited with reason %q", got.State, got.Exit, ReasonShimUnresponsive)
	}
	if st, err := executor.ReadExit(filepath.Join(e.stateDir, "containers", info.ID)); err != nil || st.Reason != ReasonShimUnresponsive {
		t.Errorf("exit.json: %+v, %v; want reason %q recorded", st, err, ReasonShimUnresponsive)
	}
	if shimAlive(info.ShimPid, filepath.Join(e.stateDir, "containers", info.ID)) {
		t.Errorf("hung shim %d still alive", info.ShimPid)
	}
	if data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", info.Pid)); err == nil && strings.HasPrefix(string(data), "sleep") {
		t.Errorf("init %d of the escalated container still runs", info.Pid)
	}
	procs, _ := filepath.Glob(filepath.Join(testutil.CgroupRoot, "*", e.cgParent, info.ID, "cgroup.procs"))
	for _, p := range procs {
		if data, err := os.ReadFile(p); err == nil && strings.TrimSpace(string(data)) != "" {
			t.Errorf("%s still lists %q", p, data)
		}
	}
	if _, err := e.net.Address(info.ID); !errors.Is(err, isolator.ErrNotFound) {
		t.Errorf("network of the escalated container not released: %v", err)
	}
	if got.Address == "" {
		t.Errorf("Info.Address of the escalated container is empty; want the address it had")
	}
}

// TestKillStoppedShim: Kill of a container whose shim is SIGSTOPped
// returns (the shim's deadline passes, the containerizer kills the shim
// and the container's cgroup itself and records "shim-unresponsive"),
// and the other containers are served meanwhile.
func TestKillStoppedShim(t *testing.T) {
	e := newNetEnv(t)
	e.shimTimeout = time.Second
	c := e.start()
	hung := e.launch(testutil.UniqueName("hung"), "exec sleep 1000", isolator.Limits{Network: true})
	other := e.launch(testutil.UniqueName("other"), "exec sleep 1000", isolator.Limits{Network: true})
	stopShim(t, e, hung)

	ctx, cancel := context.WithTimeout(context.Background(), hungBound)
	defer cancel()
	killed := make(chan error, 1)
	go func() { killed <- c.Kill(ctx, hung.ID, -1) }()
	// Served while the kill waits for the hung shim.
	if err := c.Signal(ctx, other.ID, syscall.Signal(0)); err != nil {
		t.Errorf("signal another container while one shim hangs: %v", err)
	}
	if err := <-killed; err != nil {
		t.Fatalf("kill with a stopped shim: %v", err)
	}
	checkEscalated(t, e, c, hung)
	if st, err := c.Wait(ctx, hung.ID); err != nil || st.Reason != ReasonShimUnresponsive {
		t.Errorf("wait after the escalation: %+v, %v", st, err)
	}
	if err := c.Kill(ctx, other.ID, -1); err != nil {
		t.Fatalf("kill the other container: %v", err)
	}
	if st := e.wait(other.ID); st.Signal != 9 || st.Reason == ReasonShimUnresponsive {
		t.Errorf("other container: %+v", st)
	}
}

// TestWaitStoppedShim: Wait on a container whose shim stops answering
// returns once the shim has left shimMisses probes unanswered, with the
// container killed and "shim-unresponsive" recorded.
func TestWaitStoppedShim(t *testing.T) {
	e := newNetEnv(t)
	e.shimTimeout = time.Second
	c := e.start()
	hung := e.launch(testutil.UniqueName("hung"), "exec sleep 1000", isolator.Limits{Network: true})
	ctx, cancel := context.WithTimeout(context.Background(), hungBound)
	defer cancel()
	type result struct {
		st  *ExitStatus
		err error
	}
	waited := make(chan result, 1)
	go func() {
		st, err := c.Wait(ctx, hung.ID)
		waited <- result{st, err}
	}()
	stopShim(t, e, hung)
	r := <-waited
	if r.err != nil {
		t.Fatalf("wait with a stopped shim: %v", r.err)
	}
	if r.st.Reason != ReasonShimUnresponsive {
		t.Errorf("exit %+v, want reason %q", r.st, ReasonShimUnresponsive)
	}
	checkEscalated(t, e, c, hung)
}

// TestRecoverStoppedShim: an agent restart with one SIGSTOPped shim
// recovers every container within a bounded time (the hung one is
// escalated and reported exited), and the live one stays under control.
func TestRecoverStoppedShim(t *testing.T) {
	e := newNetEnv(t)
	e.shimTimeout = time.Second
	e.start()
	hung := e.launch(testutil.UniqueName("hung"), "exec sleep 1000", isolator.Limits{Network: true})
	live := e.launch(testutil.UniqueName("live"), "exec sleep 1000", isolator.Limits{Network: true})
	stopShim(t, e, hung)

	c := e.restart()
	ctx, cancel := context.WithTimeout(context.Background(), hungBound)
	defer cancel()
	infos, err := c.Recover(ctx)
	if err != nil {
		t.Fatalf("recover with a stopped shim: %v", err)
	}
	if len(infos) != 2 {
		t.Errorf("recovered %d containers, want 2", len(infos))
	}
	checkEscalated(t, e, c, hung)
	got, err := c.Get(ctx, live.ID)
	if err != nil || got.State != StateRunning || got.Pid != live.Pid {
		t.Fatalf("live container recovered as %+v, %v", got, err)
	}
	if err := c.Kill(ctx, live.ID, -1); err != nil {
		t.Fatal(err)
	}
}

// TestRecoverRemovedSocket: a shim whose control socket was removed does
// not stop an agent restart: it is escalated like a hung one.
func TestRecoverRemovedSocket(t *testing.T) {
	e := newNetEnv(t)
	e.shimTimeout = time.Second
	e.start()
	orphaned := e.launch(testutil.UniqueName("nosock"), "exec sleep 1000", isolator.Limits{Network: true})
	live := e.launch(testutil.UniqueName("live"), "exec sleep 1000", isolator.Limits{Network: true})
	if err := os.Remove(filepath.Join(e.stateDir, "containers", orphaned.ID, executor.SocketFile)); err != nil {
		t.Fatal(err)
	}

	c := e.restart()
	ctx, cancel := context.WithTimeout(context.Background(), hungBound)
	defer cancel()
	if _, err := c.Recover(ctx); err != nil {
		t.Fatalf("recover with a removed shim.sock: %v", err)
	}
	checkEscalated(t, e, c, orphaned)
	if got, err := c.Get(ctx, live.ID); err != nil || got.State != StateRunning {
		t.Fatalf("live container recovered as %+v, %v", got, err)
	}
}

// TestExitedContainersReleaseNetwork: more containers than a /29 holds
// exit one after the other without being destroyed, and a new launch
// still gets an address; so do containers that exited while the agent was
// down, once it recovers. Inspect keeps each one's address.
func TestExitedContainersReleaseNetwork(t *testing.T) {
	e := newNetEnv(t)
	e.netCfg.Subnet = netip.PrefixFrom(e.netCfg.Subnet.Addr(), 29) // 5 containers
	c := e.start()
	ctx, cancel := context.WithTimeout(context.Background(), hungBound)
	defer cancel()
	seen := map[string]bool{}
	for i := range 8 {
		id := fmt.Sprintf("%s-%d", testutil.UniqueName("exits"), i)
		info := e.launch(id, "true", isolator.Limits{Network: true, NetBandwidthMbit: 20})
		if info.Address == "" {
			t.Fatalf("launch %d: no address in Info", i)
		}
		seen[info.Address] = true
		e.wait(id)
		got, err := c.Get(ctx, id)
		if err != nil || got.Address != info.Address {
			t.Errorf("exited %s: address %q, %v; want %q kept", id, got.Address, err, info.Address)
		}
	}
	if len(seen) < 2 {
		t.Errorf("addresses handed out: %v", seen)
	}
	// Five containers wait while the agent is down, then exit; after the
	// restart their addresses are free again.
	var waiting []string
	for i := range 5 {
		id := fmt.Sprintf("%s-%d", testutil.UniqueName("down"), i)
		e.launch(id, "while [ ! -e /mnt/sandbox/go ]; do sleep 0.05; done", isolator.Limits{Network: true})
		waiting = append(waiting, id)
	}
	if _, err := c.Launch(ctx, Spec{ID: testutil.UniqueName("full"), Command: []string{"true"}, Limits: isolator.Limits{MilliCPUs: 100, Network: true}}); err == nil {
		t.Fatal("a sixth running container got an address in a /29")
	}
	_ = e.c.Close()
	_ = e.net.Close()
	for _, id := range waiting {
		if err := os.WriteFile(filepath.Join(e.stateDir, "containers", id, executor.SandboxDir, "go"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range waiting {
		waitFor(t, func() bool {
			_, err := executor.ReadExit(filepath.Join(e.stateDir, "containers", id))
			return err == nil
		})
	}
	c = e.start()
	if _, err := c.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	id := testutil.UniqueName("after")
	e.launch(id, "true", isolator.Limits{Network: true})
	e.wait(id)
}
