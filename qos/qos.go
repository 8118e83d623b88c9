package qos

import (
	"context"
	"errors"
	"fmt"
	"github.com/brimnode/brim/internal/errdefs"
	"github.com/brimnode/brim/internal/exitstatus"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/brimnode/brim/internal/failrun"
	"github.com/brimnode/brim/internal/registry"
	"github.com/brimnode/brim/monitor"
)

var (
	// ErrUnknown is returned for a name no controller is registered under.
	ErrUnknown = errors.New("unknown qos controller")
	// ErrInvalidOption is returned for an option value that does not parse
	// or is out of range (internal/registry.ErrInvalidOption, the one
	// "invalid option" of estimators and QoS controllers).
	ErrInvalidOption = registry.ErrInvalidOption
	// ErrNotSupported is returned by a factory that cannot run on this host
	// (internal/errdefs.ErrNotSupported, the one "not supported").
	ErrNotSupported = errdefs.ErrNotSupported
)

// ReasonPreempted is the exit reason of a container killed by a QoS
// correction: internal/exitstatus.ReasonPreempted (the one vocabulary),
// as the plain string plugins and Actuator.Kill use. It is a container's
// reason, not a task's: the task runner's table maps it to
// masterlinkpb.ReasonContainerPreempted (the same string, so containers
// checkpointed by older agents read the same; a test in agent/taskrunner
// holds them equal). qos never imports the master link.
const ReasonPreempted = string(exitstatus.ReasonPreempted)

// Controller computes the corrections to apply now from the node's usage.
// It is called from one goroutine at a time, every QoS round (1 s by
// default) and when the monitor signals new data.
type Controller interface {
	Corrections(ctx context.Context, u monitor.Usage) ([]Correction, error)
}

// Pender is an optional ability of a Controller: Pending reports whether
// its last round saw a degradation that further observations may confirm
// before it corrects. Run then runs a round again after
// LoopConfig.Recheck instead of a whole Interval later, so confirming a
// degradation costs one report window, not one loop interval.
type Pender interface {
	Pending() bool
}

// Type is the kind of a correction.
type Type int

const (
	// Throttle lowers a revocable container's cpu quota to CPUQuota.
	Throttle Type = iota + 1
	// Unthrottle restores a revocable container's own cpu limit.
	Unthrottle
	// Freeze freezes every process of a revocable container.
	Freeze
	// Thaw thaws a frozen container.
	Thaw
	// Kill kills a revocable container; its task ends with reason
	// CONTAINER_PREEMPTED.
	Kill
	// ThrottleIO limits a revocable container's block io to
	// IOBytesPerSec (cgroup v2 io.max, v1 blkio.throttle.*); the writes
	// are the Actuator's (IOActuator). Not part of the plugin protocol.
	ThrottleIO
	// UnthrottleIO lifts a ThrottleIO.
	UnthrottleIO
)

var typeNames = [...]string{Throttle: "THROTTLE", Unthrottle: "UNTHROTTLE", Freeze: "FREEZE", Thaw: "THAW", Kill: "KILL",
	ThrottleIO: "THROTTLE_IO", UnthrottleIO: "UNTHROTTLE_IO"}

// String returns the wire name ("THROTTLE", …).
func (t Type) String() string {
	if t > 0 && int(t) < len(typeNames) {
		return typeNames[t]
	}
	return "Type(" + strconv.Itoa(int(t)) + ")"
}

// Trigger names the signal that caused a correction.
type Trigger struct {
	// Signal is "cpu-throttling", "runqueue-p99", "psi-cpu", "psi-memory",
	// "app-latency", "load", "recovered", or a plugin's own name.
	Signal string
	// Victim is the non-revocable container that was hurt, if any.
	Victim string
	// Value is the signal's value; Baseline the victim's learned normal;
	// Threshold the value beyond which the signal counts as degraded.
	Value, Baseline, Threshold float64
}

// String renders the trigger for logs and status.
func (t Trigger) String() string {
	s := t.Signal
	if t.Victim != "" {
		s += " of " + t.Victim
	}
	if t.Value == 0 && t.Baseline == 0 && t.Threshold == 0 {
		return s // no measurement behind it (a slow start)
	}
	return fmt.Sprintf("%s = %.4g (baseline %.4g, threshold %.4g)", s, t.Value, t.Baseline, t.Threshold)
}

// Correction is one action on a revocable container.
type Correction struct {
	Type        Type
	ContainerID string
	// CPUQuota is the new cpu limit in thousandths of a cpu (Throttle).
	CPUQuota int64
	// IOBytesPerSec is the block io limit (ThrottleIO), read and write,
	// per device.
	IOBytesPerSec int64
	// Reason is a human sentence; Trigger the signal behind it.
	Reason  string
	Trigger Trigger
}

// String renders the correction for logs.
func (c Correction) String() string {
	s := c.Type.String() + " " + c.ContainerID
	switch c.Type {
	case Throttle:
		s += fmt.Sprintf(" to %d mcpu", c.CPUQuota)
	case ThrottleIO:
		s += fmt.Sprintf(" to %d B/s", c.IOBytesPerSec)
	}
	return s + ": " + c.Trigger.String()
}

// Options are a controller's configuration, from agent flags
// (--qos-opt key=value) or a config file. Getters return errors wrapping
// ErrInvalidOption.
type Options = registry.Options

// ParseOptions parses "k=v" pairs (repeated flags) into Options.
func ParseOptions(kvs []string) (Options, error) { return registry.ParseOptions(kvs) }

// Factory builds a controller from its options. log is already named.
type Factory = registry.Factory[Controller]

// Registry maps names to controller factories (internal/registry's one
// registry type). Build it in cmd with NewRegistry; safe for concurrent
// use. Register panics on a nil factory or an empty, duplicate or
// "plugin:" name; New returns an error wrapping ErrUnknown for a name
// nothing is registered under.
type Registry = registry.Registry[Controller]

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return registry.New(registry.Kind[Controller]{
		Name: "qos controller", Component: "qos", Key: "controller", Unknown: ErrUnknown,
		Plugin: func(p registry.PluginOptions, log *slog.Logger) Controller {
			return NewPlugin(p.Path, PluginConfig{Args: p.Args, Timeout: p.Timeout, StartTimeout: p.StartTimeout,
				MinBackoff: p.MinBackoff, MaxBackoff: p.MaxBackoff, History: p.History}, log)
		},
	})
}

// RegisterBuiltins registers noop, load and interference on r.
func RegisterBuiltins(r *Registry) {
	r.Register("noop", NewNoop)
	r.Register("load", NewLoad)
	r.Register("interference", NewInterference)
}

// Open builds the controller named by spec, the value of --qos: a
// registered name ("interference") or "plugin:/path/to/bin [args…]" for an
// out-of-process plugin (options are then plugin options: timeout,
// start-timeout, min-backoff, max-backoff, history). The caller closes
// the result if it implements io.Closer (plugins do).
func Open(r *Registry, spec string, opts Options, log *slog.Logger) (Controller, error) {
	return r.Open(spec, opts, log)
}

// Fallback wraps c so that an error is answered with no corrections
// (noop) for that round. Failures are logged per run (internal/failrun):
// the first at once, then at most one warning a minute, and the recovery.
func Fallback(c Controller, log *slog.Logger) Controller {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &fallback{c: c, log: log}
}

type fallback struct {
	c     Controller
	log   *slog.Logger
	fails failrun.Logger
}

func (f *fallback) Corrections(ctx context.Context, u monitor.Usage) ([]Correction, error) {
	cs, err := f.c.Corrections(ctx, u)
	if err == nil {
		f.fails.Success(f.log, "qos controller recovered")
		return cs, nil
	}
	if ctx.Err() != nil {
		return cs, err
	}
	f.fails.Failure(f.log, "qos controller failed; no corrections this round", err, time.Now())
	return nil, nil
}

// Close closes the wrapped controller if it is an io.Closer.
func (f *fallback) Close() error {
	if c, ok := f.c.(interface{ Close() error }); ok {
		return c.Close()
	}
	return nil
}

// Noop never corrects anything.
type Noop struct{}

var _ Controller = Noop{}

// NewNoop is the noop factory.
func NewNoop(Options, *slog.Logger) (Controller, error) { return Noop{}, nil }

// Corrections implements Controller.
func (Noop) Corrections(context.Context, monitor.Usage) ([]Correction, error) { return nil, nil }

// youngestRevocable returns the revocable containers, youngest first (ties
// by ID, for determinism).
func youngestRevocable(u *monitor.Usage) []*monitor.ContainerUsage {
	var out []*monitor.ContainerUsage
	for i := range u.Containers {
		if u.Containers[i].Revocable {
			out = append(out, &u.Containers[i])
		}
	}
	slices.SortFunc(out, func(a, b *monitor.ContainerUsage) int {
		if c := b.StartedAt.Compare(a.StartedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out
}
