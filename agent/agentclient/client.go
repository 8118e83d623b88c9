package agentclient

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/brimnode/brim/agent/agentpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// ErrUnreachable is wrapped by errors saying no agent serves the socket.
var ErrUnreachable = errors.New("cannot reach the agent")

// probeTimeout bounds the connect probe of Dial.
const probeTimeout = 5 * time.Second

// Client is a connection to an agent's API. It is safe for concurrent use;
// the caller closes it.
type Client struct {
	agentpb.AgentClient
	conn   *grpc.ClientConn
	socket string
}

// Option changes how Dial's client calls the agent.
type Option func(*options)

type options struct {
	callTimeout, probeTimeout time.Duration
}

// ProbeTimeout bounds Dial's connect probe by d instead of 5 s (shell
// completion, which must never hold the shell).
func ProbeTimeout(d time.Duration) Option { return func(o *options) { o.probeTimeout = d } }

// CallTimeout bounds every unary call but Wait (which lasts until the
// container exits) by d — a Kill by d plus its grace — unless the
// caller's context ends sooner: a wedged agent then fails the call with
// DeadlineExceeded, "the agent did not answer … within d", instead of
// holding its caller forever. 0 (the default) leaves calls to their
// contexts.
func CallTimeout(d time.Duration) Option { return func(o *options) { o.callTimeout = d } }

// deadlineSlack is how early before a call's bound a DeadlineExceeded
// still counts as the bound's (rather than the agent's own, such as a
// kill still exiting).
const deadlineSlack = 100 * time.Millisecond

// boundCalls is the unary interceptor of CallTimeout.
func boundCalls(socket string, d time.Duration) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if method == agentpb.Agent_Wait_FullMethodName {
			return invoker(ctx, method, req, reply, cc, opts...)
		}
		bound := d
		if k, ok := req.(*agentpb.KillRequest); ok && k.GraceNanos > 0 {
			bound += time.Duration(k.GraceNanos)
		}
		bctx, cancel := context.WithTimeout(ctx, bound)
		defer cancel()
		err := invoker(bctx, method, req, reply, cc, opts...)
		// gRPC sends the deadline along: the agent's side may end the
		// call a moment before this side's timer does.
		if dl, _ := bctx.Deadline(); status.Code(err) == codes.DeadlineExceeded && ctx.Err() == nil && time.Until(dl) < deadlineSlack {
			return status.Errorf(codes.DeadlineExceeded, "the agent at %s did not answer %s within %v (wedged?)",
				socket, method[strings.LastIndexByte(method, '/')+1:], bound)
		}
		return err
	}
}

// Dial connects to the agent serving socket. It first connects once
// itself, so that a dead socket fails here with an error wrapping
// ErrUnreachable that names the socket, not on the first call.
func Dial(socket string, opts ...Option) (*Client, error) {
	o := options{probeTimeout: probeTimeout}
	for _, opt := range opts {
		opt(&o)
	}
	if o.callTimeout < 0 {
		return nil, fmt.Errorf("agent call timeout %v: want 0 or more", o.callTimeout)
	}
	if err := agentpb.CheckSocketPath(socket); err != nil {
		return nil, fmt.Errorf("connect to the agent: %w", err)
	}
	probe, err := net.DialTimeout("unix", socket, o.probeTimeout)
	if err != nil {
		cause := err
		var se *os.SyscallError
		if errors.As(err, &se) {
			cause = se.Err
		}
		return nil, fmt.Errorf("%w at %s: %v (is brim agent running?)", ErrUnreachable, socket, cause)
	}
	_ = probe.Close() // only a probe
	sock := socket
	// gRPC's unix:// target needs an absolute path.
	if abs, err := filepath.Abs(sock); err == nil {
		sock = abs
	}
	dopts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	if o.callTimeout > 0 {
		dopts = append(dopts, grpc.WithUnaryInterceptor(boundCalls(socket, o.callTimeout)))
	}
	conn, err := grpc.NewClient("unix://"+sock, dopts...)
	if err != nil {
		return nil, fmt.Errorf("connect to the agent at %s: %w", sock, err)
	}
	return &Client{AgentClient: agentpb.NewAgentClient(conn), conn: conn, socket: socket}, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// APIError is an error the agent's API returned: its text is the agent's
// message, which names the problem. An Unavailable one wraps
// ErrUnreachable.
type APIError struct {
	Code    codes.Code
	Message string
	socket  string
}

func (e *APIError) Error() string {
	if e.Code == codes.Unavailable {
		return fmt.Sprintf("%s at %s: %s (is brim agent running?)", ErrUnreachable, e.socket, e.Message)
	}
	return e.Message
}

// Unwrap makes errors.Is(err, ErrUnreachable) true for Unavailable.
func (e *APIError) Unwrap() error {
	if e.Code == codes.Unavailable {
		return ErrUnreachable
	}
	return nil
}

// Error returns err as an *APIError when it is a gRPC status (err
// unchanged otherwise, nil for nil).
func (c *Client) Error(err error) error { return apiError(c.socket, err) }

func apiError(socket string, err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	return &APIError{Code: st.Code(), Message: st.Message(), socket: socket}
}
