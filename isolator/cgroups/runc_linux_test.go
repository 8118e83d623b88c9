package cgroups

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/brimnode/brim/internal/testutil"
	"github.com/brimnode/brim/isolator"
)

// TestRuncJoinsPreparedGroup checks the launcher contract with a real
// runtime: runc (libcontainer) joins the group Prepare made, with no
// resources in its config but device rules, keeps brim's limits, and brim
// then resizes the running container.
func TestRuncJoinsPreparedGroup(t *testing.T) {
	var i *Isolator
	if testutil.CgroupV2() {
		i, _ = newV2(t)
	} else {
		i, _ = newV1(t)
	}
	runc, err := exec.LookPath("runc")
	testutil.Require(t, err == nil, "needs runc (make deps)")
	busybox, err := exec.LookPath("busybox")
	testutil.Require(t, err == nil, "needs busybox-static (make deps)")
	ctx := context.Background()

	var launch isolator.Launch
	if err := i.Prepare(ctx, "rc", isolator.Limits{MilliCPUs: 500, MemoryBytes: 64 << 20, Pids: 32}, &launch); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = i.Cleanup(context.Background(), "rc") })

	bundle := t.TempDir()
	rootfs := filepath.Join(bundle, "rootfs")
	for _, d := range []string{"bin", "proc", "dev", "sys", "tmp"} {
		if err := os.MkdirAll(filepath.Join(rootfs, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	bb, err := os.ReadFile(busybox)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(rootfs, "bin", "busybox"), bb, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(runc, "spec", "--bundle", bundle).CombinedOutput(); err != nil {
		t.Fatalf("runc spec: %v: %s", err, out)
	}
	cfgPath := filepath.Join(bundle, "config.json")
	var cfg map[string]any
	b, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	proc := cfg["process"].(map[string]any)
	proc["terminal"] = false
	proc["args"] = []string{"/bin/busybox", "sleep", "300"}
	linux := cfg["linux"].(map[string]any)
	linux["cgroupsPath"] = launch.CgroupPath
	if b, err = json.Marshal(cfg); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfgPath, b, 0o644); err != nil {
		t.Fatal(err)
	}

	state, name := filepath.Join(bundle, "state"), testutil.UniqueName("brim-test")
	pidFile := filepath.Join(bundle, "pid")
	// Output to a file: the detached container inherits it, a pipe would
	// keep the command waiting until the container exits.
	logPath := filepath.Join(bundle, "out")
	log, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	run := exec.Command(runc, "--root", state, "run", "-d", "--bundle", bundle, "--pid-file", pidFile, name)
	run.Stdout, run.Stderr = log, log
	if err := run.Run(); err != nil {
		t.Fatalf("runc run: %v: %s", err, mustRead(t, logPath))
	}
	t.Cleanup(func() {
		if out, err := exec.Command(runc, "--root", state, "delete", "-f", name).CombinedOutput(); err != nil {
			t.Errorf("runc delete: %v: %s", err, out)
		}
	})
	pid, err := strconv.Atoi(strings.TrimSpace(string(mustRead(t, pidFile))))
	if err != nil {
		t.Fatal(err)
	}
	if err := i.Isolate(ctx, "rc", pid); err != nil {
		t.Fatalf("container init not in the prepared group: %v", err)
	}
	// runc applied no resources of its own: brim's limits hold.
	if i.Version() == V2 {
		checkFiles(t, i, "rc", map[string]string{"/cpu.weight": weight(500, isolator.Guaranteed), "/memory.max": "67108864", "/pids.max": "32"})
	} else {
		checkFiles(t, i, "rc", map[string]string{"cpu/cpu.shares": "512", "memory/memory.limit_in_bytes": "67108864", "pids/pids.max": "32"})
	}

	// Resize while running changes the cgroup files.
	if err := i.Update(ctx, "rc", isolator.Limits{MilliCPUs: 1500, CPUQuota: true, MemoryBytes: 128 << 20, Pids: 64}); err != nil {
		t.Fatal(err)
	}
	if i.Version() == V2 {
		checkFiles(t, i, "rc", map[string]string{"/cpu.weight": weight(1500, isolator.Guaranteed), "/cpu.max": "150000 100000",
			"/memory.max": "134217728", "/pids.max": "64"})
	} else {
		checkFiles(t, i, "rc", map[string]string{"cpu/cpu.shares": "1536", "cpu/cpu.cfs_quota_us": "150000",
			"memory/memory.limit_in_bytes": "134217728", "pids/pids.max": "64"})
	}
	var st isolator.Statistics
	if err := i.Usage(ctx, "rc", &st); err != nil {
		t.Fatal(err)
	}
	if st.Pids < 1 || st.MemUsageBytes == 0 {
		t.Errorf("usage of the container: pids %d memory %d", st.Pids, st.MemUsageBytes)
	}
	if err := i.Cleanup(ctx, "rc"); !errors.Is(err, ErrBusy) {
		t.Errorf("Cleanup of a running container = %v, want ErrBusy", err)
	}
	if out, err := exec.Command(runc, "--root", state, "delete", "-f", name).CombinedOutput(); err != nil {
		t.Fatalf("runc delete: %v: %s", err, out)
	}
	if err := i.Cleanup(ctx, "rc"); err != nil {
		t.Fatal(err)
	}
	for _, h := range i.hierarchies() {
		if exists(filepath.Join(h, launch.CgroupPath)) {
			t.Errorf("%s%s left", h, launch.CgroupPath)
		}
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
