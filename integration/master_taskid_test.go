package integration

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestMasterTaskIDReuseAfterFrameworkGone (issue 30): `brim run --task-id
// x` is killed (-9) while its task runs; the task finishes with nobody to
// acknowledge its end, and the framework is removed at its failover
// timeout. A second `brim run --task-id x` then runs x on the same agent,
// and the agent resends the first task's FINISHED (here by coming back
// after a kill -9: its retries are an hour apart). The second task must
// run on: RUNNING in the master, nothing but RUNNING said to its
// framework, its container alive. Before, the stale FINISHED was matched
// by task ID: the second framework was told FINISHED exit 0 for its
// `sleep 600`, the master then killed the container as an untracked live
// task (SIGKILL), and the second task's updates had waited on the agent
// behind the first's.
func TestMasterTaskIDReuseAfterFrameworkGone(t *testing.T) {
	m := startMasterProc(t)
	ag := startLinkedAgent(t, m.Addr, "--status-retry-min", "1h", "--status-retry-max", "1h")
	updates := filepath.Join(ag.StateDir, "state", "agent", "masterlink", "updates")
	pending := func() string {
		files, _ := filepath.Glob(filepath.Join(updates, "*.json"))
		var out []string
		for _, f := range files {
			if b, err := os.ReadFile(f); err == nil && strings.Contains(string(b), `"pending"`) {
				out = append(out, string(b))
			}
		}
		return strings.Join(out, "\n")
	}

	first := startRun(t, m.Addr, "--task-id", "x", "--failover-timeout", "3s", "--cpus", "0.1", "--mem", "32", "--", "sleep", "2")
	first.waitLine(t, "RUNNING")
	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitState(t, m.Addr, "the first framework removed, its task gone", func(st masterState) bool {
		return len(st.Frameworks) == 0 && len(st.Tasks) == 0
	})
	eventually(t, "the first task's end unacknowledged on the agent", func() bool { return strings.Contains(pending(), "x") })

	second := startRun(t, m.Addr, "--task-id", "x", "--failover-timeout", "3s", "--cpus", "0.1", "--mem", "32", "--", "sleep", "600")
	second.waitLine(t, "RUNNING")
	st := waitState(t, m.Addr, "the second task running", func(st masterState) bool {
		return len(st.Tasks) == 1 && st.Tasks[0].State == "RUNNING"
	})
	secondFW := st.Tasks[0].FrameworkID

	// The agent comes back and resends the first task's end.
	ag.kill9()
	ag.start()
	eventually(t, "every update acknowledged", func() bool { return pending() == "" })
	waitState(t, m.Addr, "the agent back", func(st masterState) bool {
		return len(st.Agents) == 1 && st.Agents[0].Connected
	})
	st = getState(t, m.Addr)
	if len(st.Tasks) != 1 || st.Tasks[0].FrameworkID != secondFW || st.Tasks[0].State != "RUNNING" {
		t.Fatalf("tasks after the first task's end came back: %+v, want the second x RUNNING", st.Tasks)
	}
	if states := taskStates(second.output()); len(states) == 0 || states[len(states)-1] != "RUNNING" || strings.Contains(second.output(), "FINISHED") {
		t.Fatalf("the second brim run saw %v:\n%s", states, second.output())
	}
	select {
	case <-second.done:
		t.Fatalf("the second brim run exited (%d):\n%s", second.code, second.output())
	default:
	}
	running := 0
	for _, c := range ag.list() {
		if c.State == "running" {
			running++
		}
	}
	if running != 1 {
		t.Fatalf("%d containers running, want the second x's: %+v", running, ag.list())
	}
}
