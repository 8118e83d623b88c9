package masterlink

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
)

// TaskExecer is the optional ability of a TaskRunner to run a process in
// a running task's container: exec sessions a framework (or an operator
// the exec_tasks ACL allows) opens through the master. The master has
// authorized the caller; the runner applies the agent's own rules (the
// task's confinement, root only where the task is root).
type TaskExecer interface {
	// ExecTask runs start's process in framework frameworkID's task
	// taskID and streams sio until it exits; ending ctx kills it. An
	// error means the process did not run, or its session broke.
	ExecTask(ctx context.Context, frameworkID, taskID string, start *pb.ExecTaskStart, sio ExecStdio) (*pb.ExecExit, error)
}

// ExecStdio is an exec session's input and output on the agent.
type ExecStdio struct {
	// Stdin is the caller's input (nil unless the start asks for it).
	Stdin io.Reader
	// Stdout and Stderr go to the caller.
	Stdout, Stderr io.Writer
	// Resize carries the caller's terminal sizes.
	Resize <-chan *pb.TerminalSize
	// Started tells the caller the process runs.
	Started func()
}

// execStartWait bounds how long the agent waits for the master's start
// of a session it opened (the master's side is bounded too:
// master/exec_grpc.go has the protocol).
const execStartWait = 10 * time.Second

// execCloseWait bounds how long the agent waits, once it sent the exit,
// for the master to end the session (so that the exit is not cut off by
// the stream's cancel).
const execCloseWait = 5 * time.Second

// openExec runs the session the master asks for, in a goroutine owned by
// the link session (wg; ctx is the link session's).
func (c *Client) openExec(ctx context.Context, wg *sync.WaitGroup, api pb.AgentLinkClient, o *pb.OpenExec) {
	x, ok := c.opts.Runner.(TaskExecer)
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := c.runExec(ctx, api, x, ok, o); err != nil {
			c.log.Warn("exec session", "session", o.SessionId, "framework", o.FrameworkId, "task", o.TaskId, "err", err)
		}
	}()
}

// runExec is one exec session on the agent: open the stream, take the
// master's start, run the process, send its output and exit.
func (c *Client) runExec(ctx context.Context, api pb.AgentLinkClient, x TaskExecer, ok bool, o *pb.OpenExec) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := api.ExecSession(ctx)
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	c.mu.Lock()
	id := c.id
	c.mu.Unlock()
	if err := stream.Send(&pb.ExecSessionAgent{Msg: &pb.ExecSessionAgent_Open{Open: &pb.ExecSessionOpen{SessionId: o.SessionId, AgentId: id}}}); err != nil {
		return fmt.Errorf("open: %w", err)
	}
	timer := time.AfterFunc(execStartWait, cancel)
	first, err := stream.Recv()
	if !timer.Stop() {
		return fmt.Errorf("no start from the master within %v", execStartWait)
	}
	if err != nil {
		return fmt.Errorf("wait for the start: %w", err)
	}
	start := first.GetStart()
	s := &execStream{stream: stream}
	switch {
	case start == nil:
		return errors.New("the master's first message is not a start")
	case start.FrameworkId != o.FrameworkId || start.TaskId != o.TaskId:
		return s.fail(fmt.Errorf("the start names task %s of framework %s, the session task %s of %s", start.TaskId, start.FrameworkId, o.TaskId, o.FrameworkId))
	case !ok:
		return s.fail(errors.New("this agent cannot run processes in tasks"))
	}
	sio := s.stdio(start.Stdin)
	received := make(chan struct{})
	go func() {
		defer close(received)
		s.receive(ctx)
		// The master ended the stream: the caller went (or the master),
		// so the session is over and its process is killed. After the
		// exit this ends nothing.
		cancel()
	}()
	exit, err := x.ExecTask(ctx, o.FrameworkId, o.TaskId, start, sio)
	if s.stdinR != nil {
		_ = s.stdinR.Close() // a receive blocked on input nobody reads goes on
	}
	if err != nil {
		err = s.fail(err)
	} else {
		err = s.send(&pb.ExecOutput{Msg: &pb.ExecOutput_Exit{Exit: exit}})
		_ = stream.CloseSend()
	}
	// The master ends the stream once it passed the exit on.
	select {
	case <-received:
	case <-time.After(execCloseWait):
	}
	return err
}

// execStream is the agent's side of a session stream. Sends are
// serialised (output, the start's answer and the exit come from several
// goroutines).
type execStream struct {
	stream pb.AgentLink_ExecSessionClient
	mu     sync.Mutex

	stdinR *io.PipeReader
	stdinW *io.PipeWriter
	resize chan *pb.TerminalSize
}

func (s *execStream) send(out *pb.ExecOutput) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stream.Send(&pb.ExecSessionAgent{Msg: &pb.ExecSessionAgent_Output{Output: out}})
}

// fail tells the caller why the process did not run (or its session
// broke) and returns err.
func (s *execStream) fail(err error) error {
	_ = s.send(&pb.ExecOutput{Msg: &pb.ExecOutput_Error{Error: err.Error()}})
	_ = s.stream.CloseSend()
	return err
}

type execWriter struct {
	s      *execStream
	stderr bool
}

func (w execWriter) Write(p []byte) (int, error) {
	data := append([]byte(nil), p...)
	out := &pb.ExecOutput{Msg: &pb.ExecOutput_Stdout{Stdout: data}}
	if w.stderr {
		out.Msg = &pb.ExecOutput_Stderr{Stderr: data}
	}
	if err := w.s.send(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (s *execStream) stdio(stdin bool) ExecStdio {
	s.resize = make(chan *pb.TerminalSize, 1)
	sio := ExecStdio{
		Stdout: execWriter{s: s}, Stderr: execWriter{s: s, stderr: true}, Resize: s.resize,
		Started: func() { _ = s.send(&pb.ExecOutput{Msg: &pb.ExecOutput_Started{Started: &pb.Empty{}}}) },
	}
	if stdin {
		s.stdinR, s.stdinW = io.Pipe()
		sio.Stdin = s.stdinR
	}
	return sio
}

// receive applies the caller's input until the stream ends; its end
// before the stdin's end cuts stdin (the process's session is over: the
// caller cancels the process).
func (s *execStream) receive(ctx context.Context) {
	defer func() {
		if s.stdinW != nil {
			_ = s.stdinW.CloseWithError(io.ErrUnexpectedEOF)
		}
	}()
	for {
		in, err := s.stream.Recv()
		if err != nil {
			return
		}
		switch m := in.Msg.(type) {
		case *pb.ExecInput_Stdin:
			if s.stdinW != nil {
				if _, err := s.stdinW.Write(m.Stdin); err != nil {
					s.stdinW = nil
				}
			}
		case *pb.ExecInput_StdinEnd:
			if s.stdinW != nil {
				_ = s.stdinW.Close()
				s.stdinW = nil
			}
		case *pb.ExecInput_Resize:
			select {
			case <-s.resize:
			default:
			}
			select {
			case s.resize <- m.Resize:
			case <-ctx.Done():
				return
			}
		}
	}
}
