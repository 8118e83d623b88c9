package integration

import (
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/brimnode/brim/internal/testutil"
)

// awaitNotify returns the first message starting with prefix, failing
// after a bound; other messages are passed over (WATCHDOG=1 pings).
func awaitNotify(t *testing.T, ch <-chan string, prefix string) string {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case m := <-ch:
			if strings.HasPrefix(m, prefix) {
				return m
			}
		case <-timeout:
			t.Fatalf("no %q from the agent", prefix)
		}
	}
}

// TestAgentNotify: under Type=notify the agent says READY=1 only once it
// has recovered its containers, pings the watchdog, brackets a SIGHUP
// reload with RELOADING=1 / READY=1 and says STOPPING=1 on its way out.
func TestAgentNotify(t *testing.T) {
	testutil.RequireRoot(t)
	msgs := testutil.NotifySocket(t)
	t.Setenv("WATCHDOG_USEC", "1000000")
	dir := t.TempDir()
	conf := writeTemp(t, dir, "agent.toml", `log-level = "debug"`)
	a := startAgent(t, "--config", conf)
	awaitNotify(t, msgs, "READY=1")
	a.run("--name", "survivor", "--", "sleep", "600")

	// A restarted agent is ready only with the container recovered.
	a.stop()
	awaitNotify(t, msgs, "STOPPING=1")
	a.start()
	if m := awaitNotify(t, msgs, "READY=1"); !strings.Contains(m, "1 containers running") {
		t.Errorf("READY after recovery: %q, want the recovered container counted", m)
	}
	for range 2 {
		awaitNotify(t, msgs, "WATCHDOG=1")
	}
	if err := a.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	awaitNotify(t, msgs, "RELOADING=1")
	if m := awaitNotify(t, msgs, "READY=1"); !strings.Contains(m, "reloaded") {
		t.Errorf("after reload: %q", m)
	}
}

// TestAgentParentLock: a second agent pointed at the cgroup parent a live
// agent owns is refused (it used to take the first agent's containers for
// orphans and remove them), and leaves them running.
func TestAgentParentLock(t *testing.T) {
	testutil.RequireRoot(t)
	a := startAgent(t)
	id := a.run("--name", "mine", "--", "sleep", "600")
	base := t.TempDir()
	r := runBrimBounded(t, a.Parent, "agent", "--state-dir", filepath.Join(base, "state"), "--socket", filepath.Join(base, "agent.sock"),
		"--cgroup-parent", a.Parent, "--resources", "cpus:1;mem:256")
	if r.code != 1 || !strings.Contains(r.stderr, "cgroup parent in use by another agent") {
		t.Errorf("second agent on %s: exit %d, stderr %q", a.Parent, r.code, r.stderr)
	}
	if c := a.inspect(id); c.State != "running" {
		t.Errorf("the first agent's container is %s", c.State)
	}
}

// TestMasterNotify: the master says READY=1 once its store is loaded and
// its port listens, pings the watchdog while allocation cycles run,
// answers /health, /version and /metrics, brackets a SIGHUP reload with
// RELOADING=1 / READY=1 and says STOPPING=1 on SIGTERM.
func TestMasterNotify(t *testing.T) {
	msgs := testutil.NotifySocket(t)
	t.Setenv("WATCHDOG_USEC", "1000000")
	m := startMasterProc(t)
	if r := awaitNotify(t, msgs, "READY=1"); !strings.Contains(r, "serving on") {
		t.Errorf("READY: %q", r)
	}
	for range 2 {
		awaitNotify(t, msgs, "WATCHDOG=1")
	}
	base := "http://" + m.Addr
	for path, want := range map[string]string{"/health": `"ready"`, "/version": `"commit"`} {
		code, body := httpGetBody(t, base+path)
		if code != 200 || !strings.Contains(body, want) {
			t.Errorf("GET %s: %d %s", path, code, body)
		}
	}
	resp, err := http.Post(base+"/weights", "application/json", strings.NewReader(`[{"role": "analytics", "weight": 2}]`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /weights: %d %s", resp.StatusCode, b)
	}
	if _, body := httpGetBody(t, base+"/metrics"); !strings.Contains(body, "brim_master_store_write_seconds_count 1\n") ||
		!strings.Contains(body, "brim_master_allocation_cycle_seconds_count") {
		t.Errorf("/metrics after one store write:\n%s", body)
	}
	if err := m.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	awaitNotify(t, msgs, "RELOADING=1")
	awaitNotify(t, msgs, "READY=1")
	m.stop()
	awaitNotify(t, msgs, "STOPPING=1")
}

func httpGetBody(t *testing.T, url string) (int, string) {
	t.Helper()
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
