package executor

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/brimnode/brim/internal/procio"
)

// An exec or attach session is one connection to the shim's control
// socket: a request line, the shim's answer line, then frames both ways
// until the process (exec) or the connection ends.
//
//	agent (Client.Exec)                           shim (exec_linux.go)
//	{"v":1,"op":"exec","exec":{…}}\n        ─▶   the process built from the container's
//	                                              own config; user and privileges checked
//	                                        ◀─   {"v":1,"pid":N,…}\n  (or "error": nothing runs)
//	[stdin …] [stdin-end] [resize w h]      ─▶   written to its stdin / pty master
//	                                        ◀─   [stdout …] [stderr …]  (a tty: stdout only)
//	                                        ◀─   [exit {code,signal}]   last frame, then close
//	connection ends before [exit]           ─▶   terminal hung up, process SIGKILLed
//
// Attach is the same with "op":"attach" and no output frames (the
// container's output is read from its log): stdin, stdin-end and resize
// go to the container's own stdin and terminal; the shim closes the
// connection when the container exits.
//
// A frame is a kind byte, a big-endian uint32 length and at most
// maxFrame bytes. Neither side buffers beyond one frame: a peer that
// does not read blocks the other's writes, and a process that does not
// read its stdin blocks the agent, so memory stays bounded whoever is slow.
const (
	frameStdin    byte = 1
	frameStdinEnd byte = 2
	frameResize   byte = 3 // payload: width, height (uint16 each)
	frameStdout   byte = 4
	frameStderr   byte = 5
	frameExit     byte = 6 // payload: exitRecord JSON
)

// maxFrame bounds one frame's payload.
const maxFrame = 32 << 10

// Operations of stdio sessions (see above).
const (
	opExec   = "exec"
	opAttach = "attach"
)

// ErrExecRefused is returned when the shim refuses an exec: a user or
// privileges beyond the container's own process.
var ErrExecRefused = errors.New("exec refused")

// ExecSpec is a process to run in a running container. Its namespaces,
// cgroups, capabilities, seccomp filter, no_new_privs and masked paths are
// the container's own; only what is here differs.
type ExecSpec struct {
	Args []string `json:"args"`
	// Env is the whole environment (the caller merges the container's).
	Env []string `json:"env,omitempty"`
	// Cwd inside the container; "/" when empty.
	Cwd string `json:"cwd,omitempty"`
	// UID and GID as the container sees them (inside its user namespace,
	// if it has one). Root is refused unless the container runs as root
	// or in a user namespace.
	UID uint32 `json:"uid"`
	GID uint32 `json:"gid"`
	// Tty makes a terminal for the process in the container; Width and
	// Height are its first size.
	Tty    bool   `json:"tty,omitempty"`
	Width  uint16 `json:"width,omitempty"`
	Height uint16 `json:"height,omitempty"`
	// Stdin: the session sends input; without it stdin is /dev/null.
	Stdin bool `json:"stdin,omitempty"`
}

// Validate checks the fields the shim relies on.
func (e *ExecSpec) Validate() error {
	if len(e.Args) == 0 || e.Args[0] == "" {
		return errors.New("exec: empty command")
	}
	return nil
}

// TermSize is a terminal's size in characters (procio's, shared with
// the agent).
type TermSize = procio.TermSize

// Stdio is the caller's side of a session (procio's, shared with the
// agent).
type Stdio = procio.Stdio

// Exec runs spec in the container and streams its stdio until it exits,
// returning how it ended. Ending ctx ends the session: the shim hangs up
// the process's terminal and kills it. Errors wrap ErrExecRefused (the
// shim refused the user or privileges), ErrNotRunning, ErrShimGone, or
// say that the shim does not know exec (started by an older agent).
func (c *Client) Exec(ctx context.Context, spec ExecSpec, sio Stdio) (*ExitStatus, error) {
	s, err := c.openStdio(ctx, request{Op: opExec, Exec: &spec})
	if err != nil {
		return nil, err
	}
	defer s.close()
	if sio.Started != nil {
		sio.Started(s.pid)
	}
	return s.run(ctx, sio, true)
}

// Attach connects to the stdin and terminal of the container (one
// launched with Bundle.Stdin or Bundle.Tty) until ctx ends, the
// container exits or io.Stdin ends (with closeStdin, the end closes the
// container's stdin; otherwise it only detaches). Output is not sent:
// it is in the container's log.
func (c *Client) Attach(ctx context.Context, in Stdio, closeStdin bool) error {
	s, err := c.openStdio(ctx, request{Op: opAttach})
	if err != nil {
		return err
	}
	defer s.close()
	s.detachAtEOF = !closeStdin
	_, err = s.run(ctx, in, false)
	return err
}

// session is the client's side of one stdio connection.
type session struct {
	conn        net.Conn
	br          *bufio.Reader
	pid         int
	detachAtEOF bool

	wmu sync.Mutex // one frame at a time
}

func (c *Client) openStdio(ctx context.Context, req request) (*session, error) {
	req.V = ProtocolVersion
	conn, err := dialSocket(ctx, c.dir)
	if err != nil {
		return nil, err
	}
	// The answer comes once the process runs (or is refused): bounded
	// like any call.
	_ = conn.SetDeadline(time.Now().Add(c.timeout + execWaitSlack))
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	s := &session{conn: conn, br: bufio.NewReader(conn)}
	resp, err := s.handshake(req)
	if !stop() || err != nil {
		conn.Close()
		if ctx.Err() != nil {
			return nil, fmt.Errorf("shim %s: %w", req.Op, ctx.Err())
		}
		return nil, err
	}
	if resp.Error != "" {
		conn.Close()
		switch resp.ErrorKind {
		case errKindNotRunning:
			return nil, fmt.Errorf("shim %s: %w", req.Op, ErrNotRunning)
		case errKindRefused:
			return nil, fmt.Errorf("shim %s: %w: %s", req.Op, ErrExecRefused, resp.Error)
		case kindCommandNotFound:
			return nil, fmt.Errorf("shim %s: %w: %s", req.Op, ErrCommandNotFound, resp.Error)
		}
		if resp.Error == fmt.Sprintf("unknown operation %q", req.Op) {
			return nil, fmt.Errorf("shim %s: %w: the container's shim predates %s (run by an older agent)", req.Op, ErrNotSupported, req.Op)
		}
		return nil, fmt.Errorf("shim %s: %s", req.Op, resp.Error)
	}
	_ = conn.SetDeadline(time.Time{})
	s.pid = resp.Pid
	return s, nil
}

func (s *session) handshake(req request) (*response, error) {
	if err := json.NewEncoder(s.conn).Encode(req); err != nil {
		return nil, fmt.Errorf("send %s to shim: %w", req.Op, errors.Join(ErrShimGone, err))
	}
	line, err := s.br.ReadBytes('\n')
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return nil, fmt.Errorf("shim %s: %w", req.Op, ErrShimUnresponsive)
		}
		return nil, fmt.Errorf("shim %s: %w: %w", req.Op, ErrShimGone, err)
	}
	var resp response
	if err := json.Unmarshal(line, &resp); err != nil {
		return nil, fmt.Errorf("decode shim response: %w", err)
	}
	if resp.V != ProtocolVersion {
		return nil, fmt.Errorf("shim speaks protocol version %d, want %d", resp.V, ProtocolVersion)
	}
	return &resp, nil
}

func (s *session) close() { s.conn.Close() }

// run pumps io through the session until the exit frame (output true) or
// the connection's end.
func (s *session) run(ctx context.Context, sio Stdio, output bool) (*ExitStatus, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { _ = s.conn.Close() })
	defer stop()
	inDone := make(chan error, 1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		inDone <- s.pumpInput(ctx, sio)
	}()
	defer wg.Wait()
	defer cancel() // ends pumpInput before the wait
	if !output {
		// Attach: nothing comes back but the close at the container's
		// exit; input ends the session when it detaches.
		readDone := make(chan struct{})
		go func() {
			defer close(readDone)
			_, _ = s.br.ReadByte() // the shim's close: its error says no more
		}()
		select {
		case err := <-inDone:
			if err != nil {
				return nil, err
			}
			<-readDone
			return nil, nil
		case <-readDone:
			return nil, nil
		}
	}
	for {
		kind, payload, err := readFrame(s.br)
		if err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("exec: %w", context.Cause(ctx))
			}
			select {
			case ierr := <-inDone:
				if ierr != nil {
					return nil, ierr
				}
			default:
			}
			return nil, fmt.Errorf("exec: the shim ended the session: %w: %w", ErrShimGone, err)
		}
		switch kind {
		case frameStdout, frameStderr:
			w := sio.Stdout
			if kind == frameStderr {
				w = sio.Stderr
			}
			if w != nil {
				if _, err := w.Write(payload); err != nil {
					return nil, fmt.Errorf("exec output: %w", err)
				}
			}
		case frameExit:
			var rec exitRecord
			if err := json.Unmarshal(payload, &rec); err != nil {
				return nil, fmt.Errorf("exec: decode exit: %w", err)
			}
			return rec.status(), nil
		default:
			return nil, fmt.Errorf("exec: unexpected frame %d from the shim", kind)
		}
	}
}

// pumpInput sends stdin and resizes until ctx ends; at stdin's end it
// sends stdin-end (an attach that detaches at EOF closes the connection
// instead).
func (s *session) pumpInput(ctx context.Context, sio Stdio) error {
	var stdin <-chan []byte
	var inErr <-chan error
	if sio.Stdin != nil {
		data, errc := readChunks(ctx, sio.Stdin)
		stdin, inErr = data, errc
	}
	resize := sio.Resize
	for {
		select {
		case <-ctx.Done():
			return nil
		case sz, ok := <-resize:
			if !ok {
				resize = nil
				continue
			}
			var p [4]byte
			binary.BigEndian.PutUint16(p[:2], sz.Width)
			binary.BigEndian.PutUint16(p[2:], sz.Height)
			if err := s.send(frameResize, p[:]); err != nil {
				return nil // the reader sees the end
			}
		case b, ok := <-stdin:
			if ok {
				if err := s.send(frameStdin, b); err != nil {
					return nil
				}
				continue
			}
			stdin = nil
			if err := <-inErr; err != nil {
				return fmt.Errorf("read stdin: %w", err)
			}
			if s.detachAtEOF {
				_ = s.conn.Close()
				return nil
			}
			_ = s.send(frameStdinEnd, nil)
		}
	}
}

// readChunks reads r in a goroutine that ends with r (at EOF or error,
// sent on errc) or when ctx ends and the chunk it holds cannot be sent.
// A read blocked on r (a terminal) outlives ctx until r yields: the
// caller's stdin is read by whoever owns it, as with any copy from a
// terminal.
func readChunks(ctx context.Context, r io.Reader) (<-chan []byte, <-chan error) {
	data := make(chan []byte)
	errc := make(chan error, 1)
	go func() {
		defer close(data)
		for {
			buf := make([]byte, maxFrame)
			n, err := r.Read(buf)
			if n > 0 {
				select {
				case data <- buf[:n]:
				case <-ctx.Done():
					errc <- nil
					return
				}
			}
			if err != nil {
				if errors.Is(err, io.EOF) {
					err = nil
				}
				errc <- err
				return
			}
		}
	}()
	return data, errc
}

func (s *session) send(kind byte, p []byte) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return writeFrame(s.conn, kind, p)
}

// writeFrame writes one frame (p at most maxFrame bytes).
func writeFrame(w io.Writer, kind byte, p []byte) error {
	var hdr [5]byte
	hdr[0] = kind
	binary.BigEndian.PutUint32(hdr[1:], uint32(len(p)))
	if _, err := w.Write(append(hdr[:], p...)); err != nil {
		return err
	}
	return nil
}

// readFrame reads one frame; a payload over maxFrame is an error.
func readFrame(r *bufio.Reader) (byte, []byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n > maxFrame {
		return 0, nil, fmt.Errorf("frame of %d bytes: at most %d", n, maxFrame)
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(r, p); err != nil {
		return 0, nil, err
	}
	return hdr[0], p, nil
}

// decodeResize reads a resize frame's payload.
func decodeResize(p []byte) (TermSize, bool) {
	if len(p) != 4 {
		return TermSize{}, false
	}
	return TermSize{Width: binary.BigEndian.Uint16(p[:2]), Height: binary.BigEndian.Uint16(p[2:])}, true
}
