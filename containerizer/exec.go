package containerizer

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/brimnode/brim/executor"
	"github.com/brimnode/brim/internal/hostuser"
)

// ErrExecRefused is returned by Exec when the container's shim refuses
// the process: a user or privileges beyond the container's own process.
var ErrExecRefused = executor.ErrExecRefused

// ExecSpec is a process to run in a running container.
type ExecSpec struct {
	Command []string
	// Env is added to the environment the container was launched with
	// (a key it has is replaced).
	Env []string
	// Cwd inside the container; "/" when empty.
	Cwd string
	// User is NAME, UID, NAME:GROUP or UID:GID of the host's user
	// database, the IDs inside the container's user namespace if it has
	// one; "" is root.
	User       string
	Tty, Stdin bool
	Size       executor.TermSize
}

// Exec runs spec in container id through its shim (executor.Client.Exec)
// and streams sio until the process exits; ending ctx kills it. Errors
// wrap ErrNotFound, ErrNotRunning, ErrCommandNotFound, ErrExecRefused,
// ErrNotSupported (a shim that predates exec).
func (c *Containerizer) Exec(ctx context.Context, id string, spec ExecSpec, sio executor.Stdio) (*ExitStatus, error) {
	ct, err := c.get(id)
	if err != nil {
		return nil, fmt.Errorf("exec %s: %w", id, err)
	}
	if ct.exitStatus() != nil {
		return nil, fmt.Errorf("exec %s: %w", id, ErrNotRunning)
	}
	var user hostuser.ID
	if spec.User != "" {
		if user, err = hostuser.Lookup("/", spec.User); err != nil {
			return nil, fmt.Errorf("exec %s: %w", id, err)
		}
	}
	b, err := executor.ReadBundle(ct.dir)
	if err != nil {
		return nil, fmt.Errorf("exec %s: %w", id, err)
	}
	x := executor.ExecSpec{
		Args: spec.Command, Env: mergeEnv(b.Env, spec.Env), Cwd: spec.Cwd, UID: user.UID, GID: user.GID,
		Tty: spec.Tty, Width: spec.Size.Width, Height: spec.Size.Height, Stdin: spec.Stdin,
	}
	st, err := c.client(ct).Exec(ctx, x, sio)
	if err != nil {
		return nil, fmt.Errorf("exec %s: %w", id, stdioErr(err))
	}
	return st, nil
}

// Attach sends sio's input and resizes to container id's stdin and
// terminal (one launched with Spec.Stdin or Tty) until ctx ends, the
// container exits or the input ends (closing the container's stdin with
// closeStdin). Errors wrap ErrNotFound, ErrNotRunning, ErrNotSupported.
func (c *Containerizer) Attach(ctx context.Context, id string, sio executor.Stdio, closeStdin bool) error {
	ct, err := c.get(id)
	if err != nil {
		return fmt.Errorf("attach %s: %w", id, err)
	}
	if ct.exitStatus() != nil {
		return fmt.Errorf("attach %s: %w", id, ErrNotRunning)
	}
	if err := c.client(ct).Attach(ctx, sio, closeStdin); err != nil {
		return fmt.Errorf("attach %s: %w", id, stdioErr(err))
	}
	return nil
}

// stdioErr maps the shim's ends of a session onto the containerizer's
// sentinels: a shim gone or that says the container exited is
// ErrNotRunning.
func stdioErr(err error) error {
	if errors.Is(err, executor.ErrNotRunning) || errors.Is(err, executor.ErrShimGone) {
		return fmt.Errorf("%w: %w", ErrNotRunning, err)
	}
	return err
}

// mergeEnv returns base with extra's variables added, a key of base that
// extra names replaced in place.
func mergeEnv(base, extra []string) []string {
	out := make([]string, 0, len(base)+len(extra))
	at := map[string]int{}
	for _, e := range append(append([]string(nil), base...), extra...) {
		k, _, _ := strings.Cut(e, "=")
		if i, ok := at[k]; ok {
			out[i] = e
			continue
		}
		at[k] = len(out)
		out = append(out, e)
	}
	return out
}
