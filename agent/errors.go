package agent

import (
	"errors"
	"fmt"
	"strings"
)

var (
	// ErrNotFound is returned for a container ID or name the agent does not know.
	ErrNotFound = errors.New("container not found")
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
	// ErrAgentRunning is returned when another agent already serves the
	// socket or holds the state dir.
	ErrAgentRunning = errors.New("another agent is running")
	// ErrNotSupported is returned where the host cannot run the agent.
	ErrNotSupported = errors.New("not supported on this host")
)

// InsufficientResourcesError says which resource a request asked too much of.
type InsufficientResourcesError struct {
	Asked Resources // what the request needs (only the short resources set)
	Free  Resources // what was free of those resources
	// Pool is "revocable" for the revocable pool, empty for the agent's
	// own resources; Why explains the pool's size (the estimate).
	Pool string
	Why  string
}

func (e *InsufficientResourcesError) Error() string {
	var asked, free []string
	if e.Asked.MilliCPUs != 0 {
		asked = append(asked, "cpus:"+FormatMilli(e.Asked.MilliCPUs))
		free = append(free, "cpus:"+FormatMilli(e.Free.MilliCPUs))
	}
	if e.Asked.MemMiB != 0 {
		asked = append(asked, fmt.Sprintf("mem:%d", e.Asked.MemMiB))
		free = append(free, fmt.Sprintf("mem:%d", e.Free.MemMiB))
	}
	what := "resources"
	if e.Pool != "" {
		what = e.Pool + " resources"
	}
	msg := fmt.Sprintf("insufficient %s: asked %s, free %s", what, strings.Join(asked, ";"), strings.Join(free, ";"))
	if len(asked) == 0 {
		msg = fmt.Sprintf("insufficient %s", what)
	}
	if e.Why != "" {
		msg += " (" + e.Why + ")"
	}
	return msg
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
