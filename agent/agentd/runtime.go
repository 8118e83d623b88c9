package agentd

import (
	"context"
	"errors"
	"time"

	"github.com/brimnode/brim/agent"
	"github.com/brimnode/brim/containerizer"
	"github.com/brimnode/brim/isolator"
)

// runtimeAdapter lets the agent drive the containerizer (agent.Runtime),
// translating types and sentinels (both use internal/exitstatus's exit
// status as it is).
type runtimeAdapter struct{ c *containerizer.Containerizer }

var (
	_ agent.Runtime      = runtimeAdapter{}
	_ agent.StdioRuntime = runtimeAdapter{}
)

// mapErr makes the containerizer's sentinels match the agent's, keeping
// the containerizer's message. ErrNotFound and ErrNotSupported need no
// mapping: both packages alias internal/errdefs.
func mapErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, containerizer.ErrNotRunning):
		return sentinelError{agent.ErrNotRunning, err}
	case errors.Is(err, containerizer.ErrCommandNotFound):
		return sentinelError{agent.ErrCommandNotFound, err}
	case errors.Is(err, containerizer.ErrNoWorkDir):
		return sentinelError{agent.ErrInvalidArgument, err}
	case errors.Is(err, containerizer.ErrExecRefused):
		return sentinelError{agent.ErrPrivileges, err}
	}
	return err
}

type sentinelError struct{ sentinel, err error }

func (e sentinelError) Error() string   { return e.err.Error() }
func (e sentinelError) Unwrap() []error { return []error{e.sentinel, e.err} }

func infoOf(in *containerizer.Info) *agent.RuntimeInfo {
	return &agent.RuntimeInfo{
		ID: in.Spec.ID, Running: in.State == containerizer.StateRunning, Pid: in.Pid,
		StartedAt: in.StartedAt, Exit: in.Exit, SandboxDir: in.SandboxDir, LogDir: in.LogDir, Address: in.Address,
		CgroupPath: in.CgroupPath,
	}
}

func (r runtimeAdapter) Launch(ctx context.Context, s agent.LaunchSpec) (*agent.RuntimeInfo, error) {
	spec := containerizer.Spec{
		ID: s.ID, Name: s.Name, Command: s.Command, Env: s.Env, Cwd: s.Cwd,
		Rootfs: s.Rootfs, Limits: s.Limits, Labels: s.Labels, User: s.User, UserNS: s.UserNS,
		LogMaxSize: s.LogMaxSize, LogMaxFiles: s.LogMaxFiles, Stdin: s.Stdin, Tty: s.Tty,
		Image: s.Image, ReadWrite: s.ReadWrite, Sandbox: s.Sandbox, LogDir: s.LogDir,
	}
	if s.Tty && s.TtySize != (agent.TermSize{}) {
		size := s.TtySize
		spec.TtySize = &size
	}
	in, err := r.c.Launch(ctx, spec)
	if err != nil {
		return nil, mapErr(err)
	}
	return infoOf(in), nil
}

func (r runtimeAdapter) Wait(ctx context.Context, id string) (*agent.ExitStatus, error) {
	// One ExitStatus (internal/exitstatus): nothing to convert.
	st, err := r.c.Wait(ctx, id)
	if err != nil {
		return nil, mapErr(err)
	}
	return st, nil
}

func (r runtimeAdapter) Kill(ctx context.Context, id string, grace time.Duration) error {
	// The agent has already applied its default; for the containerizer 0
	// means "the default" and a negative grace "at once".
	if grace <= 0 {
		grace = -1
	}
	return mapErr(r.c.Kill(ctx, id, grace))
}

func (r runtimeAdapter) Update(ctx context.Context, id string, l isolator.Limits) error {
	return mapErr(r.c.Update(ctx, id, l))
}

func (r runtimeAdapter) Usage(ctx context.Context, id string) (*isolator.Statistics, error) {
	st, err := r.c.Usage(ctx, id)
	return st, mapErr(err)
}

func (r runtimeAdapter) Destroy(ctx context.Context, id string) error {
	return mapErr(r.c.Destroy(ctx, id))
}

// WarmSandboxes reports the containerizer's warm sandboxes.
func (r runtimeAdapter) WarmSandboxes() agent.WarmSandboxes {
	st := r.c.PoolStats()
	return agent.WarmSandboxes{Off: !st.Enabled, Ready: st.Ready, Filling: st.Filling, MemoryBytes: st.MemoryBytes,
		Warm: st.Claimed, Cold: st.Missed}
}

func (r runtimeAdapter) Recover(ctx context.Context) ([]*agent.RuntimeInfo, error) {
	infos, err := r.c.Recover(ctx)
	if err != nil {
		return nil, mapErr(err)
	}
	out := make([]*agent.RuntimeInfo, 0, len(infos))
	for _, in := range infos {
		out = append(out, infoOf(in))
	}
	return out, nil
}

func (r runtimeAdapter) Exec(ctx context.Context, id string, x agent.ExecSpec, sio agent.Stdio) (*agent.ExitStatus, error) {
	st, err := r.c.Exec(ctx, id, containerizer.ExecSpec{
		Command: x.Command, Env: x.Env, Cwd: x.Cwd, User: x.User, Tty: x.Tty, Stdin: x.Stdin, Size: x.Size,
	}, sio)
	return st, mapErr(err)
}

func (r runtimeAdapter) Attach(ctx context.Context, id string, sio agent.Stdio, closeStdin bool) error {
	return mapErr(r.c.Attach(ctx, id, sio, closeStdin))
}
