package agentserver

import (
	"context"
	"io"
	"sync"

	"github.com/brimnode/brim/agent"
	"github.com/brimnode/brim/agent/agentpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// stdioStream is the server side of Exec and Attach.
type stdioStream interface {
	Send(*agentpb.StdioOutput) error
	Recv() (*agentpb.StdioInput, error)
	Context() context.Context
}

// stdioServer turns a stream's input into an agent.Stdio and sends output back.
// Sends are serialised (a gRPC stream's Send is not safe for concurrent
// use); the receiving goroutine ends when the stream does.
type stdioServer struct {
	stream stdioStream
	mu     sync.Mutex // Send

	stdinR *io.PipeReader
	stdinW *io.PipeWriter
	resize chan agent.TermSize
}

func newStdioServer(stream stdioStream, stdin bool) *stdioServer {
	s := &stdioServer{stream: stream, resize: make(chan agent.TermSize, 1)}
	if stdin {
		s.stdinR, s.stdinW = io.Pipe()
	}
	return s
}

func (s *stdioServer) send(m *agentpb.StdioOutput) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stream.Send(m)
}

// writer sends what is written as stdout (stderr false) or stderr.
type stdioWriter struct {
	s      *stdioServer
	stderr bool
}

func (w stdioWriter) Write(p []byte) (int, error) {
	data := append([]byte(nil), p...)
	m := &agentpb.StdioOutput{Msg: &agentpb.StdioOutput_Stdout{Stdout: data}}
	if w.stderr {
		m.Msg = &agentpb.StdioOutput_Stderr{Stderr: data}
	}
	if err := w.s.send(m); err != nil {
		return 0, err
	}
	return len(p), nil
}

// stdio is the agent.Stdio of the stream (input only when asked for).
func (s *stdioServer) stdio() agent.Stdio {
	sio := agent.Stdio{
		Stdout: stdioWriter{s: s}, Stderr: stdioWriter{s: s, stderr: true}, Resize: s.resize,
		Started: func(pid int) {
			_ = s.send(&agentpb.StdioOutput{Msg: &agentpb.StdioOutput_Started{Started: &agentpb.StdioStarted{Pid: int32(pid)}}})
		},
	}
	if s.stdinR != nil {
		sio.Stdin = s.stdinR
	}
	return sio
}

// closeStdin ends a receive blocked on input nobody reads any more.
func (s *stdioServer) closeStdin() {
	if s.stdinR != nil {
		_ = s.stdinR.Close()
	}
}

// receive applies the client's messages after the first until the stream
// ends: stdin into the pipe (its end closes it), resizes to the channel
// (the newest kept when the consumer lags).
func (s *stdioServer) receive(ctx context.Context) {
	defer func() {
		if s.stdinW != nil {
			_ = s.stdinW.CloseWithError(io.ErrUnexpectedEOF)
		}
	}()
	for {
		m, err := s.stream.Recv()
		if err != nil {
			return
		}
		switch msg := m.Msg.(type) {
		case *agentpb.StdioInput_Stdin:
			if s.stdinW != nil {
				if _, err := s.stdinW.Write(msg.Stdin); err != nil {
					s.stdinW = nil
				}
			}
		case *agentpb.StdioInput_StdinEnd:
			if s.stdinW != nil {
				_ = s.stdinW.Close()
				s.stdinW = nil
			}
		case *agentpb.StdioInput_Resize:
			sz := termSize(msg.Resize)
			select {
			case <-s.resize: // drop the stale one
			default:
			}
			select {
			case s.resize <- sz:
			case <-ctx.Done():
				return
			}
		}
	}
}

// exitToProto converts an exit status.
func exitToProto(st *agent.ExitStatus) *agentpb.ExitStatus {
	if st == nil {
		return nil
	}
	return &agentpb.ExitStatus{
		Code: int32(st.Code), Signal: int32(st.Signal), OomKilled: st.OOMKilled,
		Reason: string(st.Reason), Message: st.Message, FinishedAtUnixNano: unixNano(st.FinishedAt),
	}
}

func termSize(p *agentpb.TerminalSize) agent.TermSize {
	return agent.TermSize{Width: uint16(min(p.GetWidth(), 0xffff)), Height: uint16(min(p.GetHeight(), 0xffff))}
}

// Exec runs a process in a container (see agent.proto).
func (s *server) Exec(stream agentpb.Agent_ExecServer) error {
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	start := first.GetExec()
	if start == nil {
		return status.Error(codes.InvalidArgument, "exec: the first message must be an ExecStart")
	}
	// The agent's shutdown ends the session (its process is killed: see
	// executor/exec_linux.go), without waiting for the server's grace.
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	defer context.AfterFunc(s.a.Context(), cancel)()
	io := newStdioServer(stream, start.Stdin)
	go io.receive(ctx)
	st, err := s.a.Exec(ctx, start.Id, agent.ExecSpec{
		Command: start.Command, Env: start.Env, Cwd: start.Cwd, User: start.User,
		Tty: start.Tty, Stdin: start.Stdin, Size: termSize(start.Size),
	}, io.stdio())
	io.closeStdin()
	if err != nil {
		if s.a.Context().Err() != nil {
			return status.Error(codes.Unavailable, err.Error())
		}
		return toStatus(err)
	}
	return io.send(&agentpb.StdioOutput{Msg: &agentpb.StdioOutput_Exit{Exit: exitToProto(st)}})
}

// Attach connects to a container's stdio (see agent.proto).
func (s *server) Attach(stream agentpb.Agent_AttachServer) error {
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	start := first.GetAttach()
	if start == nil {
		return status.Error(codes.InvalidArgument, "attach: the first message must be an AttachStart")
	}
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	defer context.AfterFunc(s.a.Context(), cancel)()
	io := newStdioServer(stream, start.Stdin)
	go io.receive(ctx)
	if start.Size != nil && start.Stdin {
		io.resize <- termSize(start.Size)
	}
	// The input's clean end is the client's StdinEnd: it closes the
	// container's stdin (run -i); a client that detaches sends none.
	st, err := s.a.Attach(ctx, start.Id, io.stdio(), start.Stdin, start.FromStart, true)
	io.closeStdin()
	switch {
	case err != nil && s.a.Context().Err() != nil:
		return status.Error(codes.Unavailable, err.Error())
	case err != nil:
		return toStatus(err)
	case st == nil:
		return nil // detached
	}
	return io.send(&agentpb.StdioOutput{Msg: &agentpb.StdioOutput_Exit{Exit: exitToProto(st)}})
}
