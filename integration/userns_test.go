package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestUserNSAgent (issue 13): `brim agent --userns --userns-range` runs
// every container in a user namespace: `brim container run --user root`
// needs no --allow-root-tasks, the task's uid_map is the range, its init
// is the range's first uid on the host, `brim container logs` reads its
// output, inspect says userns, and it survives an agent restart (recovered
// and killed through the new agent).
func TestUserNSAgent(t *testing.T) {
	a := startAgent(t, "--userns", "--userns-range", "3000000000:65536")
	// The user namespace's root must reach the container directories.
	if err := os.Chmod(filepath.Dir(a.StateDir), 0o711); err != nil {
		t.Fatal(err)
	}
	id := a.run("--user", "root", "--", "sh", "-c", `echo map $(cat /proc/self/uid_map); echo uid $(id -u); echo done; exec sleep 1000`)
	var logs string
	eventually(t, "the task's output", func() bool {
		logs = a.brim("container", "logs", id).stdout
		return strings.Contains(logs, "done")
	})
	for _, w := range []string{"map 0 3000000000 65536\n", "uid 0\n"} {
		if !strings.Contains(logs, w) {
			t.Errorf("logs lack %q:\n%s", w, logs)
		}
	}
	var c struct {
		Pid    int  `json:"pid"`
		UserNS bool `json:"userns"`
	}
	if err := json.Unmarshal([]byte(a.mustBrim("container", "inspect", id)), &c); err != nil {
		t.Fatal(err)
	}
	if !c.UserNS {
		t.Error("inspect does not say userns")
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", c.Pid))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(status), "Uid:\t3000000000\t3000000000\t3000000000\t3000000000\n") {
		t.Errorf("the task's init on the host is not uid 3000000000:\n%s", status)
	}

	a.stop()
	a.start()
	if st := a.inspect(id).State; st != "running" {
		t.Fatalf("after an agent restart the task is %q, want running", st)
	}
	a.mustBrim("container", "kill", id)
	eventually(t, "the kill", func() bool { return a.inspect(id).State == "exited" })
}
