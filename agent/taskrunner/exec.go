package taskrunner

import (
	"context"
	"errors"
	"fmt"

	"github.com/brimnode/brim/agent"
	"github.com/brimnode/brim/masterlink"
	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
)

// execer is the agent's ability to run a process in a container
// (*agent.Agent).
type execer interface {
	Exec(ctx context.Context, ref string, spec agent.ExecSpec, sio agent.Stdio) (*agent.ExitStatus, error)
}

var (
	_ execer                = (*agent.Agent)(nil)
	_ masterlink.TaskExecer = (*Runner)(nil)
)

// ExecTask runs start's process in the container of framework fw's task
// id (exec through the master: the master authorized the caller; the
// agent's rules hold as for `brim container exec`). Only that task's own
// container is used: a container that is not the task's (a local one of
// that name or ID prefix) is never.
func (r *Runner) ExecTask(ctx context.Context, fw, id string, start *pb.ExecTaskStart, sio masterlink.ExecStdio) (*pb.ExecExit, error) {
	x, ok := r.a.(execer)
	if !ok {
		return nil, errors.New("exec: the agent cannot run processes in containers")
	}
	k := taskKey{fw, id}
	c, err := r.a.Get(r.ref(k))
	if err != nil || !k.matches(c) {
		return nil, fmt.Errorf("exec: task %s of framework %s: no container on this agent", id, fw)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	resize := make(chan agent.TermSize, 1)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case sz := <-sio.Resize:
				select {
				case resize <- termSize(sz):
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	spec := agent.ExecSpec{
		Command: start.Command, Env: start.Env, Cwd: start.Cwd, User: start.User, Tty: start.Tty, Stdin: start.Stdin,
		Size: termSize(start.GetSize()),
	}
	r.log.Info("exec in task", "framework", fw, "task", id, "container", c.ID, "command", spec.Command[0])
	st, err := x.Exec(ctx, c.ID, spec, agent.Stdio{
		Stdin: sio.Stdin, Stdout: sio.Stdout, Stderr: sio.Stderr, Resize: resize,
		Started: func(int) {
			if sio.Started != nil {
				sio.Started()
			}
		},
	})
	if err != nil {
		return nil, err
	}
	return &pb.ExecExit{Code: int32(st.Code), Signal: int32(st.Signal)}, nil
}

// termSize converts a wire terminal size, bounded to what a terminal
// holds.
func termSize(p *pb.TerminalSize) agent.TermSize {
	return agent.TermSize{Width: uint16(min(p.GetWidth(), 0xffff)), Height: uint16(min(p.GetHeight(), 0xffff))}
}
