package agent

import (
	"errors"
	"fmt"
	"github.com/brimnode/brim/internal/errdefs"
	"strings"

	"github.com/brimnode/brim/resources"
)

var (
	// ErrNotFound is returned for a container ID or name the agent does not
	// know. It is containerizer.ErrNotFound too (internal/errdefs).
	ErrNotFound = errdefs.ErrContainerNotFound
	// ErrNameInUse is returned when a container name is already taken.
	ErrNameInUse = errors.New("container name already in use")
	// ErrInsufficientResources is returned when a launch or resize asks for
	// more than is free; errors.As gives an *InsufficientResourcesError.
	ErrInsufficientResources = errors.New("insufficient resources")
	// ErrInvalidArgument is returned for a malformed request.
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrCommandNotFound is returned when the command to run does not exist in
	// the container's root filesystem. The Runtime wraps it.
	ErrCommandNotFound = errors.New("command not found")
	// ErrNotRunning is returned for an operation that needs a running container.
	ErrNotRunning = errors.New("container is not running")
	// ErrRunning is returned when destroying a running container without force.
	ErrRunning = errors.New("container is running")
	// ErrStillExiting is returned by a kill whose container has not exited
	// within Options.KillExitTimeout of its SIGKILL (a process in
	// uninterruptible sleep, on a hung disk): the kill goes on, and the
	// exit is recorded when it comes.
	ErrStillExiting = errors.New("container has not exited yet")
	// ErrPaused is returned by a pause of a paused container, and by an
	// exec or attach into a frozen one.
	ErrPaused = errors.New("container is paused")
	// ErrNotPaused is returned by an unpause of a container not paused.
	ErrNotPaused = errors.New("container is not paused")
	// ErrTaskContainer is returned by a restart of a task's container: its
	// framework decides how its tasks run again.
	ErrTaskContainer = errors.New("container runs a task of the master")
	// ErrAgentRunning is returned when another agent already serves the
	// socket or holds the state dir.
	ErrAgentRunning = errors.New("another agent is running")
	// ErrRootNotAllowed is returned for a container that would run as root
	// on an agent whose operator did not allow it (Options.AllowRoot).
	ErrRootNotAllowed = errors.New("root tasks are not allowed on this agent (brim agent --allow-root-tasks)")
	// ErrNotSupported is returned where the host cannot run the agent
	// (internal/errdefs.ErrNotSupported, the one "not supported").
	ErrNotSupported = errdefs.ErrNotSupported
)

// InsufficientResourcesError says which resources a request asked too much
// of, in the resource model's terms (package resources).
type InsufficientResourcesError struct {
	// Asked are the short resources as asked; Free what was free of them
	// (a resource none of which is free is absent).
	Asked, Free resources.Resources
	// NotOffered names the resources asked that the pool has no total of
	// at all (e.g. net_bw on an agent without a net_bw total).
	NotOffered []string
	// Total is the pool's total of the resources asked beyond it: never
	// free, however long one waits.
	Total resources.Resources
	// Pool is "revocable" for the revocable pool, empty for the agent's
	// own resources; Why explains the pool's size (the estimate).
	Pool string
	Why  string
}

func (e *InsufficientResourcesError) Error() string {
	var asked, free []string
	for _, r := range e.Asked {
		asked = append(asked, valueText(r))
		f := resources.Resource{Name: r.Name, Type: r.Type}
		for _, x := range e.Free {
			if sameKey(x, r) {
				f = x
			}
		}
		free = append(free, valueText(f))
	}
	what := "resources"
	if e.Pool != "" {
		what = e.Pool + " resources"
	}
	msg := fmt.Sprintf("insufficient %s: asked %s, free %s", what, strings.Join(asked, ";"), strings.Join(free, ";"))
	if len(asked) == 0 {
		msg = fmt.Sprintf("insufficient %s", what)
	}
	if len(e.NotOffered) > 0 {
		msg += fmt.Sprintf(" (%s not offered by this agent)", strings.Join(e.NotOffered, ", "))
	}
	if len(e.Total) > 0 {
		whose := "this agent's total"
		if e.Pool != "" {
			whose = "the " + e.Pool + " pool's total"
		}
		var tot []string
		for _, r := range e.Total {
			tot = append(tot, valueText(r))
		}
		msg += fmt.Sprintf(" (more than %s, %s)", whose, strings.Join(tot, ";"))
	}
	if e.Why != "" {
		msg += " (" + e.Why + ")"
	}
	return msg
}

// valueText formats r as "name:value" without role or revocable marks
// (the message names the pool): "cpus:1.5", "net_bw:0", "ports:[]".
func valueText(r resources.Resource) string {
	r.Role, r.Reservation, r.Revocable = "", nil, false
	return r.String()
}

// Is makes errors.Is(err, ErrInsufficientResources) true.
func (e *InsufficientResourcesError) Is(target error) bool { return target == ErrInsufficientResources }

// NotFoundError names the container reference that matched nothing.
type NotFoundError struct {
	Ref string
}

func (e *NotFoundError) Error() string { return fmt.Sprintf("container %q not found", e.Ref) }

// Is makes errors.Is(err, ErrNotFound) true.
func (e *NotFoundError) Is(target error) bool { return target == ErrNotFound }
