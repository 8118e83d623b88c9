package agentclient

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/brimnode/brim/agent/agentpb"
)

// ErrDetached is returned by Session.Run when the detach keys were typed:
// the session ended, the container runs on.
var ErrDetached = errors.New("detached")

// DefaultDetachKeys are docker's: ctrl-p ctrl-q.
var DefaultDetachKeys = []byte{0x10, 0x11}

// StdioStream is the client side of Exec and Attach.
type StdioStream interface {
	Send(*agentpb.StdioInput) error
	Recv() (*agentpb.StdioOutput, error)
	CloseSend() error
}

// Session pumps a terminal (or pipes) through an Exec or Attach stream.
type Session struct {
	// Stdin is sent until EOF; nil: nothing.
	Stdin io.Reader
	// StdinEnd sends the end of Stdin (the process's stdin closes); false
	// keeps the stream open (attach: the container's stdin stays open).
	StdinEnd bool
	// DetachKeys, typed on Stdin, end the session with ErrDetached; nil:
	// none.
	DetachKeys []byte
	// Stdout and Stderr receive the output.
	Stdout, Stderr io.Writer
	// Resize carries the terminal's new sizes.
	Resize <-chan *agentpb.TerminalSize
}

// Run sends first, then the session's input, and writes the output until
// the exit (returned), the stream's end without one (an error), ctx's end
// or the detach keys (ErrDetached). A stdin read in progress when Run
// returns is left to finish (a terminal read cannot be interrupted).
func (s *Session) Run(ctx context.Context, stream StdioStream, first *agentpb.StdioInput) (*agentpb.ExitStatus, error) {
	if err := stream.Send(first); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	detached := make(chan struct{})
	var sendMu sync.Mutex
	send := func(m *agentpb.StdioInput) error {
		sendMu.Lock()
		defer sendMu.Unlock()
		return stream.Send(m)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.pumpResize(ctx, send)
	}()
	if s.Stdin != nil {
		go s.pumpStdin(ctx, send, detached) // ends at the next read after ctx (see Run)
	}
	out := make(chan recvResult, 1)
	go func() {
		for {
			m, err := stream.Recv()
			select {
			case out <- recvResult{m, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	for {
		var r recvResult
		select {
		case <-detached:
			return nil, ErrDetached
		case <-ctx.Done():
			return nil, ctx.Err()
		case r = <-out:
		}
		if r.err == io.EOF {
			return nil, errors.New("the agent ended the session without an exit status")
		}
		if r.err != nil {
			return nil, r.err
		}
		switch m := r.m.Msg.(type) {
		case *agentpb.StdioOutput_Stdout:
			if _, err := s.Stdout.Write(m.Stdout); err != nil {
				return nil, fmt.Errorf("write output: %w", err)
			}
		case *agentpb.StdioOutput_Stderr:
			if _, err := s.Stderr.Write(m.Stderr); err != nil {
				return nil, fmt.Errorf("write output: %w", err)
			}
		case *agentpb.StdioOutput_Exit:
			return m.Exit, nil
		}
	}
}

type recvResult struct {
	m   *agentpb.StdioOutput
	err error
}

func (s *Session) pumpResize(ctx context.Context, send func(*agentpb.StdioInput) error) {
	for {
		select {
		case <-ctx.Done():
			return
		case sz, ok := <-s.Resize:
			if !ok {
				return
			}
			if send(&agentpb.StdioInput{Msg: &agentpb.StdioInput_Resize{Resize: sz}}) != nil {
				return
			}
		}
	}
}

// pumpStdin sends Stdin, watching for the detach keys.
func (s *Session) pumpStdin(ctx context.Context, send func(*agentpb.StdioInput) error, detached chan<- struct{}) {
	buf := make([]byte, 32<<10)
	var held []byte // a prefix of the detach keys, not sent yet
	for {
		n, err := s.Stdin.Read(buf)
		if ctx.Err() != nil {
			return
		}
		if n > 0 {
			data, detach := scanDetach(s.DetachKeys, &held, buf[:n])
			if len(data) > 0 {
				if send(&agentpb.StdioInput{Msg: &agentpb.StdioInput_Stdin{Stdin: data}}) != nil {
					return
				}
			}
			if detach {
				close(detached)
				return
			}
		}
		if err != nil {
			if s.StdinEnd && errors.Is(err, io.EOF) {
				_ = send(&agentpb.StdioInput{Msg: &agentpb.StdioInput_StdinEnd{StdinEnd: &agentpb.StdinEnd{}}})
			}
			return
		}
	}
}

// scanDetach returns the bytes of p to send and whether keys were typed.
// held carries a prefix of keys across reads (sent once it turns out
// not to be the keys).
func scanDetach(keys []byte, held *[]byte, p []byte) ([]byte, bool) {
	if len(keys) == 0 {
		return p, false
	}
	var out []byte
	for _, c := range p {
		*held = append(*held, c)
		if bytes.Equal(*held, keys) {
			*held = (*held)[:0]
			return out, true
		}
		if !bytes.HasPrefix(keys, *held) {
			out = append(out, *held...)
			*held = (*held)[:0]
		}
	}
	return out, false
}
