package integration

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// logDirSize is the bytes of a container's log files.
func logDirSize(t *testing.T, dir string) int64 {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, e := range ents {
		if fi, err := e.Info(); err == nil {
			n += fi.Size()
		}
	}
	return n
}

// TestContainerLogsBounded: a container that writes as fast as it can
// keeps its log within --log-max-size × --log-max-files on the agent's
// disk (before: 300 MB of stdout in the state dir, unbounded), through a
// kill -9 and restart of the agent (its shim keeps copying); `logs` and
// `logs -f` read across the rotated files and end with the container's
// last output, stdout and stderr apart; `inspect` shows the bound.
func TestContainerLogsBounded(t *testing.T) {
	a := startAgent(t, "--log-rate", "0") // no rate bound: the flood runs flat out
	const size, files = 64 << 10, 3
	id := a.run("--cpus", "0.5", "--mem", "64", "--log-max-size", "64k", "--log-max-files", "3", "--",
		"sh", "-c", "echo to-stderr >&2; timeout 5 yes brim-flood-line; echo done")
	var c struct {
		containerJSON
		LogMaxSizeBytes int64 `json:"logMaxSizeBytes"`
		LogMaxFiles     int   `json:"logMaxFiles"`
	}
	if err := json.Unmarshal([]byte(a.mustBrim("container", "inspect", id)), &c); err != nil {
		t.Fatal(err)
	}
	if c.LogMaxSizeBytes != size || c.LogMaxFiles != files {
		t.Fatalf("inspect shows the log bound %d × %d, want %d × %d", c.LogMaxFiles, c.LogMaxSizeBytes, files, size)
	}
	follow := exec.Command(brimBinary, "container", "logs", "-f", id, "--socket", a.Socket)
	followOut, err := os.CreateTemp(t.TempDir(), "follow")
	if err != nil {
		t.Fatal(err)
	}
	follow.Stdout = followOut
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = follow.Process.Kill(); _ = follow.Wait() })

	logDir := filepath.Join(a.StateDir, "containers", id, "log")
	restarted, polls := false, 0
	for deadline := time.Now().Add(5 * time.Minute); a.inspect(id).State == "running"; time.Sleep(50 * time.Millisecond) {
		if n := logDirSize(t, logDir); n > size*files {
			t.Fatalf("log dir holds %d bytes, over %d × %d", n, files, size)
		}
		if polls++; !restarted && polls > 5 {
			a.kill9() // the shim copies on without the agent
			if n := logDirSize(t, logDir); n > size*files {
				t.Fatalf("log dir holds %d bytes without the agent, over %d × %d", n, files, size)
			}
			a.start()
			restarted = true
		}
		if time.Now().After(deadline) {
			t.Fatal("the flood did not end")
		}
	}
	if n := logDirSize(t, logDir); n > size*files {
		t.Fatalf("log dir holds %d bytes at the end, over %d × %d", n, files, size)
	}
	if !restarted {
		t.Fatal("the flood ended before the agent was restarted under it")
	}
	out := a.mustBrim("container", "logs", id)
	if !strings.HasSuffix(out, "done\n") || !strings.Contains(out, "brim-flood-line\nbrim-flood-line\n") || len(out) > size*files {
		t.Errorf("logs: %d bytes ending %q", len(out), out[max(0, len(out)-40):])
	}
	// The -f started before the restart lost its agent; one started now
	// reads the finished log and ends.
	r := a.brimWithin(hungShimBound, "container", "logs", "-f", id)
	if r.code != 0 || !strings.HasSuffix(r.stdout, "done\n") {
		t.Errorf("logs -f of the exited container: exit %d, %d bytes: %s", r.code, len(r.stdout), r.stderr)
	}
	_ = follow.Wait()

	// logs -f passes a running container's output as it comes.
	live := a.run("--", "sh", "-c", "echo first; sleep 600")
	lf := exec.Command(brimBinary, "container", "logs", "-f", live, "--socket", a.Socket)
	pipe, err := lf.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := lf.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lf.Process.Kill(); _ = lf.Wait() })
	line := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(pipe).ReadString('\n')
		line <- l
	}()
	select {
	case l := <-line:
		if l != "first\n" {
			t.Errorf("logs -f of a running container: %q", l)
		}
	case <-time.After(time.Minute):
		t.Error("logs -f of a running container passed nothing while it runs")
	}

	// stderr stays apart: a container whose two streams interleave.
	id2 := a.run("--wait", "--", "sh", "-c", "echo out-1; echo err-1 >&2; echo out-2")
	r = a.brim("container", "logs", id2)
	if r.stdout != "out-1\nout-2\n" || r.stderr != "err-1\n" {
		t.Errorf("logs: stdout %q, stderr %q", r.stdout, r.stderr)
	}
}
