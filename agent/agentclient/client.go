package agentclient

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
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
	callTimeout time.Duration
}

// CallTimeout bounds every unary call but Wait (which lasts until the
// container exits) by d, unless the caller's context ends sooner: a
// wedged agent then fails a call with DeadlineExceeded instead of
// holding its caller forever. 0 (the default) leaves calls to their
// contexts.
func CallTimeout(d time.Duration) Option { return func(o *options) { o.callTimeout = d } }

// boundCalls is the unary interceptor of CallTimeout.
func boundCalls(d time.Duration) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if method != agentpb.Agent_Wait_FullMethodName {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, d)
			defer cancel()
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
}

// Dial connects to the agent serving socket. It first connects once
// itself, so that a dead socket fails here with an error wrapping
// ErrUnreachable that names the socket, not on the first call.
func Dial(socket string, opts ...Option) (*Client, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if o.callTimeout < 0 {
		return nil, fmt.Errorf("agent call timeout %v: want 0 or more", o.callTimeout)
	}
	probe, err := net.DialTimeout("unix", socket, probeTimeout)
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
		dopts = append(dopts, grpc.WithUnaryInterceptor(boundCalls(o.callTimeout)))
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
