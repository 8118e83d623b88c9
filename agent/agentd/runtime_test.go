package agentd

import (
	"errors"
	"fmt"
	"testing"

	"github.com/brimnode/brim/agent"
	"github.com/brimnode/brim/containerizer"
)

// TestMapErr: the containerizer's sentinels become the agent's, keeping
// the containerizer's message and sentinel; other errors pass unchanged.
func TestMapErr(t *testing.T) {
	for _, tc := range []struct{ from, to error }{
		{containerizer.ErrNotFound, agent.ErrNotFound},
		{containerizer.ErrNotRunning, agent.ErrNotRunning},
		{containerizer.ErrCommandNotFound, agent.ErrCommandNotFound},
	} {
		err := fmt.Errorf("launch c1: %w", tc.from)
		got := mapErr(err)
		if !errors.Is(got, tc.to) || !errors.Is(got, tc.from) || got.Error() != err.Error() {
			t.Errorf("mapErr(%v) = %v; want it to match %v and %v with the same message", err, got, tc.to, tc.from)
		}
	}
	other := errors.New("boom")
	if mapErr(other) != other || mapErr(nil) != nil {
		t.Error("mapErr changed an error it does not map")
	}
}

func TestExitOf(t *testing.T) {
	if exitOf(nil) != nil {
		t.Error("exitOf(nil) != nil")
	}
	st := exitOf(&containerizer.ExitStatus{Code: 137, Signal: "SIGKILL", OOMKilled: true, Reason: "r", Message: "m"})
	if st.Code != 137 || st.Signal != 9 || !st.OOMKilled || st.Reason != "r" || st.Message != "m" {
		t.Errorf("exitOf: %+v", st)
	}
}
