package agentd

import (
	"errors"
	"fmt"
	"testing"

	"github.com/brimnode/brim/agent"
	"github.com/brimnode/brim/containerizer"
	"github.com/brimnode/brim/internal/errdefs"
	"github.com/brimnode/brim/isolator"
	"github.com/brimnode/brim/monitor"
)

// TestMapErr: the containerizer's sentinels become the agent's, keeping
// the containerizer's message and sentinel; other errors pass unchanged.
func TestMapErr(t *testing.T) {
	for _, tc := range []struct{ from, to error }{
		{containerizer.ErrNotFound, agent.ErrNotFound},
		{containerizer.ErrNotRunning, agent.ErrNotRunning},
		{containerizer.ErrCommandNotFound, agent.ErrCommandNotFound},
		{containerizer.ErrNoWorkDir, agent.ErrInvalidArgument},
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

// TestContainerNotFoundIsOne: every package's "container not found" is
// internal/errdefs.ErrContainerNotFound for errors.Is — before, the
// monitor's and the isolators' were sentinels of their own, and an
// isolator's "not found" passed through the runtime was no
// agent.ErrNotFound.
func TestContainerNotFoundIsOne(t *testing.T) {
	for name, s := range map[string]error{
		"agent": agent.ErrNotFound, "containerizer": containerizer.ErrNotFound,
		"isolator": isolator.ErrNotFound, "monitor": monitor.ErrNotFound,
		"agent ref": &agent.NotFoundError{Ref: "x"},
	} {
		err := mapErr(fmt.Errorf("usage c1: %w", s))
		if !errors.Is(err, errdefs.ErrContainerNotFound) || !errors.Is(err, agent.ErrNotFound) {
			t.Errorf("%s: %v is not the one container-not-found", name, err)
		}
	}
	// The narrower ones stay narrower.
	if errors.Is(agent.ErrNotFound, isolator.ErrNotFound) || errors.Is(agent.ErrNotFound, monitor.ErrNotFound) {
		t.Error("agent.ErrNotFound matches a narrower sentinel")
	}
}
