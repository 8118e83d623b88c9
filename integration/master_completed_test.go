package integration

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/brimnode/brim/internal/testutil"
)

// completedState is the part of GET /state this test reads.
type completedState struct {
	Agents []struct {
		Connected        bool    `json:"connected"`
		PerformanceScore float64 `json:"performanceScore"`
	} `json:"agents"`
	Tasks []struct {
		ID    string `json:"id"`
		State string `json:"state"`
	} `json:"tasks"`
	CompletedTasks []struct {
		ID          string `json:"id"`
		FrameworkID string `json:"frameworkId"`
		State       string `json:"state"`
		Reason      string `json:"reason"`
		Message     string `json:"message"`
		ExitCode    *int   `json:"exitCode"`
	} `json:"completedTasks"`
}

func (m *masterProc) completedState(t *testing.T) completedState {
	t.Helper()
	resp, err := m.http.Get(m.url + "/state")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st completedState
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

// TestMasterFinishedTaskAfterRestart (issue 14): a task that finished is
// in /state's completed tasks; after a master restart the agent reports
// it again (its container is kept) and it stays there, with its end
// (reason, message, exit code: issue 30), not among the live tasks; and `brim run --task-id` with its ID — another framework,
// on the same agent — runs. Before, the master adopted it as live, its ID
// stayed in use and the second run was refused; and the agent refused the
// container name (`container name already in use`).
func TestMasterFinishedTaskAfterRestart(t *testing.T) {
	m := startMasterProc(t)
	startLinkedAgent(t, m.Addr, "--perf-score", "2.5")
	noCgroup := "/" + testutil.UniqueName("brim-test")
	run := func() {
		t.Helper()
		r := runBrimBounded(t, noCgroup, "run", "--master", m.Addr, "--cpus", "0.1", "--mem", "32", "--task-id", "busy", "--timeout", "20s", "--", "true")
		if got := taskStates(r.stdout); r.code != 0 || !slices.Equal(got, []string{"STAGING", "STARTING", "RUNNING", "FINISHED"}) {
			t.Fatalf("brim run --task-id busy: exit %d, states %v:\n%s%s", r.code, got, r.stdout, r.stderr)
		}
	}
	run()
	eventually(t, "busy in the completed tasks", func() bool {
		st := m.completedState(t)
		return len(st.Tasks) == 0 && len(st.CompletedTasks) == 1 && st.CompletedTasks[0].State == "FINISHED"
	})
	m.stop()
	m.start()
	eventually(t, "the agent back", func() bool {
		st := m.completedState(t)
		return len(st.Agents) == 1 && st.Agents[0].Connected
	})
	// Connected is set with the re-registration's reconciliation: a
	// resurrected task would show now.
	st := m.completedState(t)
	if len(st.Tasks) != 0 {
		t.Fatalf("tasks after the restart: %+v", st.Tasks)
	}
	if len(st.CompletedTasks) != 1 || st.CompletedTasks[0].ID != "busy" || st.CompletedTasks[0].State != "FINISHED" {
		t.Fatalf("completed tasks after the restart: %+v", st.CompletedTasks)
	}
	// Its end too (issue 30: the reason, message and exit code were lost).
	if c := st.CompletedTasks[0]; c.Reason != "COMMAND_EXITED" || c.Message != "command exited with code 0" || c.ExitCode == nil || *c.ExitCode != 0 {
		t.Fatalf("busy after the restart: reason %q message %q exit code %v, want COMMAND_EXITED, its message and 0", c.Reason, c.Message, c.ExitCode)
	}
	if st.Agents[0].PerformanceScore != 2.5 {
		t.Errorf("agent performance score %v, want --perf-score 2.5", st.Agents[0].PerformanceScore)
	}
	run()
	eventually(t, "busy of two frameworks completed", func() bool {
		st = m.completedState(t)
		return len(st.CompletedTasks) == 2 && st.CompletedTasks[0].FrameworkID != st.CompletedTasks[1].FrameworkID &&
			st.CompletedTasks[1].State == "FINISHED"
	})
}
