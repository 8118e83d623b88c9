package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/brimnode/brim/internal/hostuser"
	"github.com/brimnode/brim/internal/procio"
	"github.com/brimnode/brim/internal/speclimit"
	"github.com/brimnode/brim/internal/subid"
)

// ErrPrivileges is returned when an exec would be more privileged than the
// container's own process (the shim refused it).
var ErrPrivileges = errors.New("beyond the container's privileges")

// StdioRuntime is the Runtime's ability to run a process in a running
// container and to attach to a container's stdin and terminal (the
// containerizer has it; Exec and Attach return ErrNotSupported for a
// Runtime without it).
type StdioRuntime interface {
	// Exec runs spec — resolved by the agent: User "UID:GID", Cwd set —
	// in container id and streams its stdio until it exits; ending ctx
	// kills it. Errors wrap ErrNotRunning,
	// ErrCommandNotFound, ErrPrivileges, ErrNotSupported.
	Exec(ctx context.Context, id string, spec ExecSpec, sio Stdio) (*ExitStatus, error)
	// Attach sends sio's input and resizes to container id's stdin and
	// terminal until ctx ends, the container exits or the input ends
	// (closing its stdin when closeStdin).
	Attach(ctx context.Context, id string, sio Stdio, closeStdin bool) error
}

// TermSize is a terminal's size in characters.
type TermSize = procio.TermSize

// Stdio is a session's input and output (see StdioRuntime); the
// containerizer's is the same type, so a session passes through
// unconverted.
type Stdio = procio.Stdio

// ExecSpec is a process a client asks to run in a container.
type ExecSpec struct {
	Command []string
	// Env is added to the container's environment (KEY=VALUE; a key the
	// container has is replaced).
	Env []string
	// Cwd is the working directory; empty: the container's.
	Cwd string
	// User as Spec.User; empty: the container's user. Root is refused
	// (ErrRootNotAllowed) unless the container runs as root or in a user
	// namespace, whatever the agent's --allow-root-tasks.
	User       string
	Tty, Stdin bool
	Size       TermSize
}

// Exec runs spec in the running container ref and streams its stdio
// through sio until it exits, returning how it ended. Errors wrap
// ErrNotFound, ErrNotRunning, ErrPaused, ErrInvalidArgument, ErrRootNotAllowed,
// ErrPrivileges, ErrCommandNotFound, ErrNotSupported.
func (a *Agent) Exec(ctx context.Context, ref string, spec ExecSpec, sio Stdio) (*ExitStatus, error) {
	rt, ok := a.rt.(StdioRuntime)
	if !ok {
		return nil, fmt.Errorf("exec: %w: the runtime cannot run processes in containers", ErrNotSupported)
	}
	c, err := a.Get(ref)
	if err != nil {
		return nil, fmt.Errorf("exec: %w", err)
	}
	if err := a.checkThawed(c); err != nil {
		return nil, fmt.Errorf("exec %s: %w", c.ID, err)
	}
	x, err := a.execSpec(ctx, c, spec)
	if err != nil {
		return nil, fmt.Errorf("exec %s: %w", c.ID, err)
	}
	a.log.Info("exec", "id", c.ID, "command", x.Command[0], "user", x.User, "tty", x.Tty)
	return rt.Exec(ctx, c.ID, x, sio) // its errors name the container
}

// checkThawed refuses a session with a frozen container, as docker does
// a paused one's: an exec would join its frozen cgroup and hang (then run
// at the thaw), an attach would see nothing. Errors wrap ErrPaused.
func (a *Agent) checkThawed(c *Container) error {
	switch {
	case c.Paused:
		return fmt.Errorf("%w: unpause it first (brim container unpause %s)", ErrPaused, c.ID)
	case c.State == StateRunning && a.QoSFrozen(c.ID):
		return fmt.Errorf("%w by the QoS controller (a revocable container frozen to protect others): try again once it is thawed", ErrPaused)
	}
	return nil
}

// execSpec checks spec against container c and resolves it for the
// Runtime: the user as "UID:GID" in the container's own user database
// (its image's, for a container of an image; inside its user namespace
// if it has one), the working directory the container's when not asked.
func (a *Agent) execSpec(ctx context.Context, c *Container, spec ExecSpec) (ExecSpec, error) {
	if c.State != StateRunning {
		return ExecSpec{}, ErrNotRunning
	}
	if len(spec.Command) == 0 || spec.Command[0] == "" {
		return ExecSpec{}, fmt.Errorf("%w: empty command", ErrInvalidArgument)
	}
	for _, e := range spec.Env {
		if k, _, ok := strings.Cut(e, "="); !ok || k == "" {
			return ExecSpec{}, fmt.Errorf("%w: environment %q: want KEY=VALUE", ErrInvalidArgument, e)
		}
	}
	if err := speclimit.Check(spec.Command, spec.Env, nil, 0); err != nil {
		return ExecSpec{}, fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	if spec.Cwd != "" && !strings.HasPrefix(spec.Cwd, "/") {
		return ExecSpec{}, fmt.Errorf("%w: working directory %q is not absolute", ErrInvalidArgument, spec.Cwd)
	}
	var userns *subid.Range
	if c.UserNS {
		if userns = a.opts.UserNSRange; userns == nil {
			return ExecSpec{}, fmt.Errorf("%w: the container has a user namespace but the agent no --userns-range", ErrInvalidArgument)
		}
	}
	lookup, release, err := a.userLookup(ctx, c)
	if err != nil {
		return ExecSpec{}, err
	}
	defer release()
	own, err := resolveUserIn(lookup, c.User, true, userns)
	if err != nil {
		return ExecSpec{}, fmt.Errorf("the container's user: %w", err)
	}
	user := own
	if spec.User != "" {
		// Root only where the container's own user is root, or root is
		// unprivileged on the host (a user namespace).
		if user, err = resolveUserIn(lookup, spec.User, true, userns); err != nil {
			return ExecSpec{}, fmt.Errorf("user: %w", err)
		}
		if user.Root() && !own.Root() && userns == nil {
			return ExecSpec{}, fmt.Errorf("user %q is root (uid 0) and the container's user %q is not, nor in a user namespace: %w", spec.User, c.User, ErrPrivileges)
		}
	}
	if spec.Cwd == "" {
		spec.Cwd = c.Cwd
	}
	spec.User = user.String()
	return spec, nil
}

// userLookup returns how container c's users are resolved: in the
// host's user database, or in its image's (held until release).
func (a *Agent) userLookup(ctx context.Context, c *Container) (func(string) (hostuser.ID, error), func(), error) {
	if c.ImageID == "" {
		return hostUser, func() {}, nil
	}
	if a.opts.Images == nil {
		return nil, nil, fmt.Errorf("%w: the container runs image %s and the agent has no image store", ErrInvalidArgument, c.Image)
	}
	img, release, err := a.holdImage(ctx, c.ImageID, PullNever)
	if err != nil {
		return nil, nil, fmt.Errorf("the container's image %s: %w", c.Image, err)
	}
	im := &imageLaunch{img: img}
	return func(u string) (hostuser.ID, error) { return im.lookupUser(a.opts.Images, c.Image, u) }, release, nil
}

// Attach connects sio to the running container ref: its output as it is
// logged (from its start with fromStart, else from now) goes to
// sio.Stdout and Stderr, and with withStdin sio's input and resizes to its
// stdin and terminal (a container run with Stdin or Tty). It returns once
// the container has exited (with its exit status), ctx ends or the input
// ends (detach: nil status). Errors wrap ErrNotFound, ErrNotRunning,
// ErrPaused, ErrInvalidArgument, ErrNotSupported.
func (a *Agent) Attach(ctx context.Context, ref string, sio Stdio, withStdin, fromStart, closeStdin bool) (*ExitStatus, error) {
	c, err := a.Get(ref)
	if err != nil {
		return nil, fmt.Errorf("attach: %w", err)
	}
	if c.State != StateRunning {
		return nil, fmt.Errorf("attach %s: %w", c.ID, ErrNotRunning)
	}
	if err := a.checkThawed(c); err != nil {
		return nil, fmt.Errorf("attach %s: %w", c.ID, err)
	}
	rt, ok := a.rt.(StdioRuntime)
	if withStdin && !ok {
		return nil, fmt.Errorf("attach %s: %w: the runtime cannot attach to containers", c.ID, ErrNotSupported)
	}
	ctxParent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	in := make(chan error, 1)
	if withStdin {
		go func() {
			in <- rt.Attach(ctx, c.ID, sio, closeStdin)
		}()
	}
	out := make(chan error, 1)
	go func() {
		opts := LogsOptions{Follow: true, FromEnd: !fromStart}
		out <- a.Logs(ctx, c.ID, opts, func(stream int, data []byte) error {
			w := sio.Stdout
			if stream == Stderr {
				w = sio.Stderr
			}
			_, err := w.Write(data)
			return err
		})
	}()
	if sio.Started != nil {
		sio.Started(0)
	}
	inDone := !withStdin // in has no value to wait for
	select {
	case err = <-out:
	case err = <-in:
		inDone = true
		if err == nil {
			// The input ended (or the container exited: its log ends
			// too); the output goes on until the container's end.
			err = <-out
			break
		}
		cancel()
		// The output ends with the cancel; the input's error is the one
		// to say, and the runtime's errors name the container.
		if oerr := <-out; oerr != nil && !errors.Is(oerr, context.Canceled) {
			a.log.Debug("attach output", "id", c.ID, "err", oerr)
		}
		return nil, err
	}
	cancel()
	if !inDone {
		// Ended by the cancel; the output's end says how it went.
		if ierr := <-in; ierr != nil && !errors.Is(ierr, context.Canceled) {
			a.log.Debug("attach input", "id", c.ID, "err", ierr)
		}
	}
	if err != nil {
		if ctxParent.Err() != nil {
			return nil, nil // the client went: detached
		}
		return nil, fmt.Errorf("attach %s: %w", c.ID, err)
	}
	// The log ended: the container has exited.
	return a.exitOf(ctxParent, c.ID)
}

// exitOf returns the exit status of a container whose log has ended.
func (a *Agent) exitOf(ctx context.Context, id string) (*ExitStatus, error) {
	c, err := a.Wait(ctx, id)
	if err != nil {
		return nil, err
	}
	return c.Exit, nil
}
