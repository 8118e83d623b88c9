package transport

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	"github.com/brimnode/brim/master"
	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Exec sessions through the master. The master cannot dial an agent (the
// agent's link is a stream the agent opened), so the agent opens a second
// stream for each session, on the master's asking, and the master splices
// it to the caller's:
//
//	caller (Scheduler.ExecTask)      master                              agent
//	ExecInput{start} ─────────────▶  authenticate, RequestExec
//	                                 (framework's principal or
//	                                 exec_tasks ACL; task running)
//	                                 MasterMessage{exec: S} ──── link ──▶
//	                                                 ◀── ExecSession: ExecSessionOpen{S, agent id}
//	                                 S pending for that agent? (else NotFound)
//	                                 ExecInput{start} ─────────────────▶  agent.Exec in the task's
//	                                                                      container (its own checks)
//	ExecInput{stdin, resize, end} ─▶ ────────────────────────────────────▶  stdin, TIOCSWINSZ
//	          ◀───────────────────── ◀── ExecOutput{started, stdout, stderr}
//	          ◀───────────────────── ◀── ExecOutput{exit | error}, stream ends
//
// Bounds: the agent must open S within execOpenTimeout (the caller gets
// Unavailable), the agent gives up on a start that does not come within
// its own timeout; each direction holds at most execBuffer messages (of at
// most gRPC's message limit), and a slow reader holds the writer back
// through gRPC's flow control. The session ends when either side goes:
// the caller's stream ending (or the master's) ends the agent's stream,
// whose end kills the process; the agent's stream ending ends the
// caller's (Unavailable unless the exit was passed on).

// execOpenTimeout bounds the wait for the agent to open a session.
const execOpenTimeout = 10 * time.Second

// execBuffer is how many messages each direction of a session holds.
const execBuffer = 4

// execSession is one session between the caller's and the agent's
// streams, each served by its own handler: a handler touches only its
// own stream, and they meet on the channels.
type execSession struct {
	agentID  string
	toAgent  chan *pb.ExecInput  // the start first, then the caller's input
	toCaller chan *pb.ExecOutput // the agent's output
	claimed  chan struct{}       // closed once the agent opened its stream
	done     chan struct{}       // closed when the session ends
	claim    sync.Once
	once     sync.Once
}

func (s *execSession) end() { s.once.Do(func() { close(s.done) }) }

// execSessions are the sessions the master waits on or splices. Safe for
// concurrent use.
type execSessions struct {
	mu sync.Mutex
	m  map[string]*execSession
}

func newExecSessions() *execSessions { return &execSessions{m: map[string]*execSession{}} }

func (e *execSessions) add(id string, s *execSession) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.m[id] = s
}

func (e *execSessions) remove(id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.m, id)
}

func newSessionID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// ExecTask serves a caller's exec session (see the diagram above).
func (s schedulerAPI) ExecTask(stream pb.Scheduler_ExecTaskServer) error {
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	start := first.GetStart()
	if start == nil {
		return status.Error(codes.InvalidArgument, "exec: the first message must be an ExecTaskStart")
	}
	if len(start.Command) == 0 || start.Command[0] == "" {
		return status.Error(codes.InvalidArgument, "exec: empty command")
	}
	ctx := stream.Context()
	p, a, err := s.a.caller(ctx)
	if err != nil {
		return s.a.grpcError(err)
	}
	id := newSessionID()
	sess := &execSession{
		toAgent: make(chan *pb.ExecInput, execBuffer), toCaller: make(chan *pb.ExecOutput, execBuffer),
		claimed: make(chan struct{}), done: make(chan struct{}),
	}
	sess.toAgent <- first
	s.a.execs.add(id, sess)
	defer s.a.execs.remove(id)
	defer sess.end()
	// The agent's ID is set before its stream can claim the session: the
	// request goes out under the master's lock, after the add.
	s.a.execs.mu.Lock()
	req := master.ExecRequest{Principal: p, FrameworkID: start.FrameworkId, TaskID: start.TaskId, Session: id}
	if a != nil {
		req.MayExecOthers = func(role string) error { return a.Authorize(p, ActionExecTasks, role) }
	}
	sess.agentID, err = s.a.m.RequestExec(req)
	s.a.execs.mu.Unlock()
	if err != nil {
		return s.a.grpcError(err)
	}
	s.a.log.Info("exec session", "session", id, "principal", p, "framework", start.FrameworkId, "task", start.TaskId, "agent", sess.agentID)
	t := time.NewTimer(execOpenTimeout)
	defer t.Stop()
	select {
	case <-sess.claimed:
	case <-t.C:
		return status.Errorf(codes.Unavailable, "exec in task %s: agent %s did not open the session within %v", start.TaskId, sess.agentID, execOpenTimeout)
	case <-ctx.Done():
		return ctx.Err()
	}
	go func() {
		defer sess.end()
		for {
			in, err := stream.Recv()
			if err != nil || in.GetStart() != nil {
				return // the caller went (or broke the protocol)
			}
			select {
			case sess.toAgent <- in:
			case <-sess.done:
				return
			}
		}
	}()
	for {
		select {
		case out := <-sess.toCaller:
			if err := stream.Send(out); err != nil {
				return err
			}
			if out.GetExit() != nil || out.GetError() != "" {
				return nil
			}
		case <-sess.done:
			// What the agent sent before its end goes first.
			for {
				select {
				case out := <-sess.toCaller:
					if err := stream.Send(out); err != nil {
						return err
					}
					if out.GetExit() != nil || out.GetError() != "" {
						return nil
					}
				default:
					if ctx.Err() != nil {
						return ctx.Err()
					}
					return status.Errorf(codes.Unavailable, "exec in task %s: the agent's session ended without an exit", start.TaskId)
				}
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// ExecSession serves an agent's side of a session it was asked to open.
func (l agentLink) ExecSession(stream pb.AgentLink_ExecSessionServer) error {
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	open := first.GetOpen()
	if open == nil {
		return status.Error(codes.InvalidArgument, "exec session: the first message must be an ExecSessionOpen")
	}
	ctx := stream.Context()
	principal, err := l.a.authenticateAgent(ctx, open.AgentId)
	if err == nil && l.a.opts.AuthenticateAgents {
		err = l.a.m.CheckExecAgent(open.AgentId, principal)
	}
	if err != nil {
		return l.a.grpcError(err)
	}
	l.a.execs.mu.Lock()
	sess := l.a.execs.m[open.SessionId]
	ok := sess != nil && sess.agentID == open.AgentId
	l.a.execs.mu.Unlock()
	if !ok {
		return status.Errorf(codes.NotFound, "exec session %s: no such session for agent %s (the caller gave up?)", open.SessionId, open.AgentId)
	}
	claimed := false
	sess.claim.Do(func() { close(sess.claimed); claimed = true })
	if !claimed {
		return status.Errorf(codes.AlreadyExists, "exec session %s: already open", open.SessionId)
	}
	defer sess.end()
	go func() {
		defer sess.end()
		for {
			m, err := stream.Recv()
			if err != nil {
				return
			}
			out := m.GetOutput()
			if out == nil {
				continue
			}
			select {
			case sess.toCaller <- out:
			case <-sess.done:
				return
			}
		}
	}()
	for {
		select {
		case in := <-sess.toAgent:
			if err := stream.Send(in); err != nil {
				return err
			}
		case <-sess.done:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("exec session %s: %w", open.SessionId, ctx.Err())
		}
	}
}
