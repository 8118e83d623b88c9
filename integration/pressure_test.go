package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/brimnode/brim/internal/testutil"
)

// TestMemoryGuardEndToEnd runs `brim agent` (oversubscription with the
// fixed estimator, the memory guard on by default) under a parent the
// test limits to 320 MiB, with oom_score_adj 300 of its own and
// --oom-score-adj 500: a non-revocable container holds 100 MiB, a revocable awk hog
// grows towards 250 MiB. The agent evicts the hog — its exit says
// CONTAINER_PREEMPTED, "evicted: memory pressure (…)", not an OOM kill —
// and the non-revocable container keeps running with no OOM kill
// anywhere. The containers' oom_score_adj are the configured 500 and 1000,
// not the agent's own.
func TestMemoryGuardEndToEnd(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.SkipUnless(t, !testutil.CgroupV2(), "the integration suite runs on the v1 host; the v2 lane runs pressure's own test")
	a := startAgent(t, "--estimator", "fixed", "--estimator-opt", "resources=cpus:1;mem:512", "--no-bpf",
		"--memory-guard-interval", "100ms", "--oom-score-adj", "500")
	// The agent's own oom_score_adj must not reach its containers: raise
	// it (going below a process's oom_score_adj_min needs
	// CAP_SYS_RESOURCE, which this machine's root lacks) and expect the
	// configured values in the containers.
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/oom_score_adj", a.cmd.Process.Pid), []byte("300"), 0); err != nil {
		t.Fatal(err)
	}
	memDir := filepath.Join(testutil.CgroupRoot, "memory", a.Parent)
	eventually(t, "the agent makes its cgroup parent", func() bool { _, err := os.Stat(memDir); return err == nil })
	if err := os.WriteFile(filepath.Join(memDir, "memory.limit_in_bytes"), []byte(strconv.Itoa(320<<20)), 0); err != nil {
		t.Fatal(err)
	}
	alloc := func(mib, step int) string {
		return fmt.Sprintf(`awk 'BEGIN{s="x"; for(i=0;i<20;i++) s=s s; for(n=0;n<%d;n++){a[n]=s n; if(n%%%d==%d) system("sleep 0.1")}; system("echo ok >/mnt/sandbox/allocated; exec sleep 1000")}'`, mib, step, step-1)
	}
	lc := a.run("--cpus", "0.5", "--mem", "160", "--", "sh", "-c", alloc(100, 100))
	eventually(t, "the non-revocable container holds its memory", func() bool {
		_, err := os.Stat(filepath.Join(a.inspect(lc).SandboxDir, "allocated"))
		return err == nil
	})
	hog := a.run("--revocable", "--cpus", "0.3", "--mem", "256", "--", "sh", "-c", alloc(250, 4))
	for id, want := range map[string]string{lc: "500", hog: "1000"} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/oom_score_adj", a.inspect(id).Pid))
		if err != nil || strings.TrimSpace(string(b)) != want {
			t.Errorf("oom_score_adj of %s = %q, %v; want %s (not the agent's 300)", id, b, err, want)
		}
	}
	eventually(t, "the hog is evicted", func() bool { return a.inspect(hog).State != "running" })
	c := a.inspect(hog)
	if c.Exit == nil || c.Exit.Reason != "CONTAINER_PREEMPTED" || !strings.HasPrefix(c.Exit.Message, "evicted: memory pressure") || c.Exit.OOMKilled {
		t.Fatalf("hog ended %+v, want an eviction for memory pressure", c.Exit)
	}
	t.Logf("hog: %s", c.Exit.Message)
	if s := a.inspect(lc).State; s != "running" {
		t.Fatalf("non-revocable container %s", s)
	}
	for _, d := range []string{memDir, filepath.Join(memDir, lc)} {
		b, err := os.ReadFile(filepath.Join(d, "memory.oom_control"))
		if err != nil || !strings.Contains(string(b), "oom_kill 0") {
			t.Errorf("%s memory.oom_control: %q, %v; want oom_kill 0", d, b, err)
		}
	}
}
