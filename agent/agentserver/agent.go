package agentserver

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/brimnode/brim/agent"
	"github.com/brimnode/brim/image"
	"github.com/brimnode/brim/isolator"
)

// Agent is what the local API serves: the agent core's operations, as
// *agent.Agent has them. It is declared here, by its consumer, so that a
// server is built over what it calls and nothing else.
type Agent interface {
	Lifecycle
	Containers
	Node
	Images
}

// Lifecycle is what Serve drives: the agent starts before the API
// answers, its lifetime ends before the API stops, and it is closed
// last.
type Lifecycle interface {
	// Start recovers the containers and starts the agent's loops.
	Start(ctx context.Context) error
	// Context ends when the agent shuts down: calls that wait on a
	// container (Wait, Logs -f) end with it.
	Context() context.Context
	// Shutdown ends the agent's lifetime; containers keep running.
	Shutdown()
	// Close releases the agent (its goroutines, its state dir's lock).
	Close() error
	ID() string
}

// Containers are the container operations of the local API.
type Containers interface {
	Launch(ctx context.Context, spec agent.Spec) (*agent.Container, error)
	List() []*agent.Container
	Get(ref string) (*agent.Container, error)
	Stats(ctx context.Context, ref string) (*agent.Container, *isolator.Statistics, error)
	SchedSignals(ref string) (agent.SchedSignals, error)
	QoSFrozen(id string) bool
	Resize(ctx context.Context, ref string, u agent.Update) (*agent.Container, error)
	Kill(ctx context.Context, ref string, grace time.Duration) (*agent.Container, error)
	Wait(ctx context.Context, ref string) (*agent.Container, error)
	Logs(ctx context.Context, ref string, opts agent.LogsOptions, emit func(stream int, data []byte) error) error
	Destroy(ctx context.Context, ref string, force bool) error
	Pause(ctx context.Context, ref string) (*agent.Container, error)
	Unpause(ctx context.Context, ref string) (*agent.Container, error)
	Restart(ctx context.Context, ref string, grace time.Duration) (*agent.Container, error)
	Top(ctx context.Context, ref string) ([]agent.Process, error)
	Exec(ctx context.Context, ref string, spec agent.ExecSpec, sio agent.Stdio) (*agent.ExitStatus, error)
	Attach(ctx context.Context, ref string, sio agent.Stdio, withStdin, fromStart, closeStdin bool) (*agent.ExitStatus, error)
}

// Node is what the local API tells about the agent itself.
type Node interface {
	Info() agent.Info
	Oversubscription() (agent.Oversubscription, bool)
	ReportLatency(ref string, l agent.LatencyReport) error
}

// Images are the image operations of the local API.
type Images interface {
	PullImage(ctx context.Context, source, name string, progress func(image.LayerProgress)) (image.Image, error)
	Images() ([]agent.ImageInfo, agent.ImageCache, error)
	RemoveImage(ctx context.Context, ref string) (image.PruneReport, error)
	PruneImages(ctx context.Context) (image.PruneReport, error)
}

var _ Agent = (*agent.Agent)(nil)

// Defaults of the local API's connection limits (Options.IdleTimeout,
// Options.MaxConns). A client reconnects over the unix socket in a
// fraction of a millisecond, and gRPC clients do it by themselves: an
// idle connection is not worth holding longer.
const (
	DefaultIdleTimeout = 5 * time.Second
	DefaultMaxConns    = 1024
)

// Options configure the local API's server.
type Options struct {
	// IdleTimeout closes a connection to the local API that has had
	// no call in progress for this long (gRPC's MaxConnectionIdle: a
	// GOAWAY, then the close; a streaming call — logs -f, wait — is a
	// call in progress). 0 never closes one; default
	// DefaultIdleTimeout is set by agentd.
	IdleTimeout time.Duration
	// MaxConns bounds the local API's open connections: one more is
	// closed as soon as it is accepted (and logged). 0: no bound.
	MaxConns int
	// Log receives the server's lines; nil discards them.
	Log *slog.Logger
}

// check refuses negative limits; errors wrap agent.ErrInvalidArgument.
func (o Options) check() error {
	if o.IdleTimeout < 0 || o.MaxConns < 0 {
		return fmt.Errorf("%w: socket idle timeout %v and connection bound %d must not be negative", agent.ErrInvalidArgument, o.IdleTimeout, o.MaxConns)
	}
	return nil
}

// log is Log, named, or a discarding logger.
func (o Options) log() *slog.Logger {
	if o.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return o.Log.With("component", "agentserver")
}
