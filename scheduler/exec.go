package scheduler

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
)

// ErrExec wraps the reason an exec session's process did not run (a
// refused user, a task not running, a command not found), as the agent
// gave it.
var ErrExec = errors.New("exec failed")

// ExecIO is the caller's side of ExecTask.
type ExecIO struct {
	// Stdin is sent until EOF, then its end (the process's stdin
	// closes); nil: nothing (start.Stdin should be false).
	Stdin io.Reader
	// Stdout and Stderr receive the output (a terminal's on Stdout).
	Stdout, Stderr io.Writer
	// Resize carries the caller terminal's new sizes; nil: none.
	Resize <-chan *pb.TerminalSize
}

// ExecTask runs a process in a running task's container through the
// master (Mesos's LAUNCH_NESTED_CONTAINER_SESSION, Nomad's alloc exec):
// start names the task (FrameworkId empty: this driver's framework) and
// the process; sio streams its stdio until it exits. It returns how the
// process ended, or an error: the master's refusal as a gRPC status
// (PermissionDenied: neither the task's framework's principal nor
// allowed by the exec_tasks ACL; NotFound; Unavailable: the agent did not
// open the session), or one wrapping ErrExec when the agent could not run
// the process. Ending ctx ends the session and kills the process. A
// stdin read in progress when it returns is left to finish.
func (d *Driver) ExecTask(ctx context.Context, start *pb.ExecTaskStart, sio ExecIO) (*pb.ExecExit, error) {
	if start.FrameworkId == "" {
		id, err := d.fid()
		if err != nil {
			return nil, err
		}
		start.FrameworkId = id
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	stream, err := d.conn().ExecTask(ctx)
	if err != nil {
		return nil, err
	}
	var mu sync.Mutex
	send := func(in *pb.ExecInput) error {
		mu.Lock()
		defer mu.Unlock()
		return stream.Send(in)
	}
	if err := send(&pb.ExecInput{Msg: &pb.ExecInput_Start{Start: start}}); err != nil {
		return nil, err
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case sz, ok := <-sio.Resize:
				if !ok || send(&pb.ExecInput{Msg: &pb.ExecInput_Resize{Resize: sz}}) != nil {
					return
				}
			}
		}
	}()
	if sio.Stdin != nil {
		go sendStdin(ctx, sio.Stdin, send) // ends at the read after ctx (a terminal read cannot be interrupted)
	}
	for {
		out, err := stream.Recv()
		if err == io.EOF {
			return nil, errors.New("exec: the master ended the session without an exit")
		}
		if err != nil {
			return nil, err
		}
		switch m := out.Msg.(type) {
		case *pb.ExecOutput_Stdout:
			if sio.Stdout != nil {
				if _, err := sio.Stdout.Write(m.Stdout); err != nil {
					return nil, fmt.Errorf("exec output: %w", err)
				}
			}
		case *pb.ExecOutput_Stderr:
			if sio.Stderr != nil {
				if _, err := sio.Stderr.Write(m.Stderr); err != nil {
					return nil, fmt.Errorf("exec output: %w", err)
				}
			}
		case *pb.ExecOutput_Exit:
			return m.Exit, nil
		case *pb.ExecOutput_Error:
			return nil, fmt.Errorf("%w: %s", ErrExec, m.Error)
		}
	}
}

// sendStdin sends r's bytes, then its end.
func sendStdin(ctx context.Context, r io.Reader, send func(*pb.ExecInput) error) {
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if ctx.Err() != nil {
			return
		}
		if n > 0 && send(&pb.ExecInput{Msg: &pb.ExecInput_Stdin{Stdin: append([]byte(nil), buf[:n]...)}}) != nil {
			return
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				_ = send(&pb.ExecInput{Msg: &pb.ExecInput_StdinEnd{StdinEnd: &pb.Empty{}}})
			}
			return
		}
	}
}
