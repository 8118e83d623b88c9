package integration

import (
	"bytes"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/brimnode/brim/internal/testutil"
)

// TestAgentStartsOnFullStateDir: an agent restarted (after kill -9) on a
// full state dir serves, adopts its running container without writing,
// says the disk is full (agent info, its log), refuses new launches with
// the reason, kills on request, and once space is freed writes what it
// kept in memory: the next restart finds the kill. Before, it exited at
// start (`recover: checkpoint …: no space left on device`) and the
// container ran unmanaged until space was freed.
func TestAgentStartsOnFullStateDir(t *testing.T) {
	a := startAgent(t)
	a.mustBrim("agent", "info") // recovered and serving
	a.kill9()
	// The state dir on a small tmpfs of its own (unmounted by the
	// harness's cleanup): a disk the test can fill.
	if err := syscall.Mount("tmpfs", a.StateDir, "tmpfs", 0, "mode=0700,size=16m"); err != nil {
		t.Fatal(err)
	}
	a.start()
	id := a.run("--cpus", "0.05", "--mem", "16", "--", "sleep", "600")
	a.kill9()
	free := testutil.FillDisk(t, a.StateDir)
	freed := false
	defer func() {
		if !freed {
			free()
		}
	}()

	a.start()
	r := a.brimWithin(hungShimBound, "agent", "info")
	if r.code != 0 {
		t.Fatalf("agent info on a full state dir: exit %d: %s", r.code, r.stderr)
	}
	if !strings.Contains(checkpointLine(r.stdout), "STATE DIR FULL") {
		t.Errorf("agent info does not say the state dir is full:\n%s", r.stdout)
	}
	if c := a.inspect(id); c.State != "running" {
		t.Fatalf("container after a restart on a full disk: %s", sprint(c))
	}
	if log, _ := os.ReadFile(a.logPath); !bytes.Contains(log, []byte("state dir full")) {
		t.Errorf("agent log does not say the state dir is full")
	}
	if r := a.brim("container", "run", "--", "true"); r.code != 1 || !strings.Contains(r.stderr, "no space left on device") {
		t.Errorf("launch on a full disk: exit %d: %s", r.code, r.stderr)
	}
	if r := a.brimWithin(hungShimBound, "container", "kill", "--grace", "0s", id); r.code != 0 {
		t.Fatalf("kill on a full disk: exit %d: %s", r.code, r.stderr)
	}
	if c := a.inspect(id); c.State != "exited" || c.Exit == nil || c.Exit.Reason != "killed" {
		t.Fatalf("container after its kill on a full disk: %s", sprint(c))
	}

	free()
	freed = true
	eventually(t, "the checkpoint written once space is freed", func() bool {
		r := a.brim("agent", "info")
		return r.code == 0 && strings.Fields(checkpointLine(r.stdout))[1] == "written" && !strings.Contains(r.stdout, "FULL")
	})
	a.kill9()
	a.start()
	if c := a.inspect(id); c.State != "exited" || c.Exit == nil || c.Exit.Reason != "killed" || c.Exit.Code != 137 {
		t.Errorf("killed container after a restart: %s", sprint(c))
	}
}

// checkpointLine is the "checkpoint" line of `brim agent info`.
func checkpointLine(info string) string {
	for _, l := range strings.Split(info, "\n") {
		if strings.HasPrefix(l, "checkpoint ") {
			return l
		}
	}
	return "checkpoint (none)"
}
