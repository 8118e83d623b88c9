package oomwatch

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/brimnode/brim/internal/testutil"
)

// TestV1 registers the OOM eventfd on a real v1 memory group with a 16
// MiB limit, runs a memory hog in it and expects a signal; once the group
// is removed the channel closes.
func TestV1(t *testing.T) {
	ctx := context.Background()
	if _, err := V1(ctx, ""); err == nil {
		t.Fatal("V1(\"\") did not fail")
	}
	// v2 has no OOM eventfd: isolator/cgroups watches memory.events there
	// (TestOOMV2), and the shim reads the kill from it.
	testutil.SkipUnless(t, !testutil.CgroupV2(), "the v1 OOM eventfd on a cgroup v2 host")
	parent := testutil.NewCgroupParent(t)
	mem := filepath.Join(testutil.CgroupRoot, "memory")
	testutil.Require(t, fileExists(filepath.Join(mem, "memory.oom_control")), "needs the cgroup v1 memory hierarchy")
	dir := filepath.Join(mem, parent, "oom")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	limit := strconv.Itoa(16 << 20)
	writeCgroup(t, dir, "memory.limit_in_bytes", limit)
	if fileExists(filepath.Join(dir, "memory.memsw.limit_in_bytes")) {
		writeCgroup(t, dir, "memory.memsw.limit_in_bytes", limit) // no escape to swap
	}
	ch, err := V1(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}

	// The hog waits for a line on stdin, by which time it is in the group.
	hog := exec.Command("sh", "-c", "read go; exec tail /dev/zero")
	in, err := hog.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := hog.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hog.Process.Kill(); _ = hog.Wait() })
	writeCgroup(t, dir, "cgroup.procs", strconv.Itoa(hog.Process.Pid))
	if _, err := in.Write([]byte("go\n")); err != nil {
		t.Fatal(err)
	}
	select {
	case _, ok := <-ch:
		if !ok {
			t.Fatal("OOM channel closed before any OOM")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no OOM notification in 30 s")
	}
	_ = hog.Process.Kill()
	_ = hog.Wait()
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(10 * time.Second)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatal("OOM channel still open 10 s after the group was removed")
		}
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func writeCgroup(t *testing.T, dir, file, value string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, file), []byte(value), 0); err != nil {
		t.Fatalf("write %s: %v", file, err)
	}
}
