package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/brimnode/brim/agent/agentpb"
	"github.com/brimnode/brim/internal/testutil"
)

// listingAgent is a fake agent whose List answers containers (a fake:
// the real agent's completion is in integration/cli_test.go).
type listingAgent struct {
	agentpb.UnimplementedAgentServer
	containers []*agentpb.Container
}

func (l listingAgent) List(context.Context, *agentpb.ListRequest) (*agentpb.ListResponse, error) {
	return &agentpb.ListResponse{Containers: l.containers}, nil
}

// complete runs `container __complete ARGS…` and returns its output.
func complete(t *testing.T, args ...string) string {
	t.Helper()
	cmd := newContainerCommand()
	var out strings.Builder
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(append([]string{"__complete"}, args...))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second) // the test's own bound
	defer cancel()
	if err := cmd.ExecuteContext(ctx); err != nil {
		t.Fatalf("__complete %v: %v", args, err)
	}
	return out.String()
}

// Container arguments complete with the agent's IDs and names, filtered
// by what the command takes; flags with their values.
func TestCompleteContainers(t *testing.T) {
	sock := testutil.ServeAgent(t, listingAgent{containers: []*agentpb.Container{
		{Id: "aaa111", Name: "web", State: "running"},
		{Id: "bbb222", Name: "bbb222", State: "running", Paused: true},
		{Id: "ccc333", Name: "job", State: "exited"},
	}})
	for _, c := range []struct {
		args      []string
		want, not []string
	}{
		{[]string{"inspect", "--socket", sock, ""}, []string{"aaa111\tweb, running", "web\taaa111, running", "ccc333\tjob, exited", "bbb222\tbbb222, paused"}, nil},
		{[]string{"top", "--socket", sock, ""}, []string{"aaa111", "bbb222"}, []string{"ccc333", "job"}},
		{[]string{"unpause", "--socket", sock, ""}, []string{"bbb222"}, []string{"aaa111", "ccc333"}},
		{[]string{"rm", "--socket", sock, "web", ""}, []string{"ccc333"}, []string{"aaa111", "web\t"}},
		{[]string{"inspect", "--socket", sock, "web", ""}, nil, []string{"aaa111", "ccc333"}},
		{[]string{"run", "--cpu-limit-mode", ""}, []string{"shares\n", "quota\n", "both\n"}, nil},
	} {
		out := complete(t, c.args...)
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("__complete %v lacks %q:\n%s", c.args, w, out)
			}
		}
		for _, n := range c.not {
			if strings.Contains(out, n) {
				t.Errorf("__complete %v offers %q:\n%s", c.args, n, out)
			}
		}
	}
}

// A wedged agent or a dead socket never holds the shell: the completion
// ends (no candidates, an error directive) within its bound.
func TestCompleteBounded(t *testing.T) {
	wedged := testutil.ServeAgent(t, wedgedLister{})
	for _, sock := range []string{wedged, "/nonexistent/agent.sock"} {
		out := complete(t, "inspect", "--socket", sock, "")
		if !strings.HasPrefix(out, ":") || !strings.Contains(out, "ShellCompDirectiveError") {
			t.Errorf("completion against %s:\n%s", sock, out)
		}
	}
}
