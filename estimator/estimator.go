package estimator

import (
	"context"
	"errors"
	"fmt"
	"github.com/brimnode/brim/internal/errdefs"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/brimnode/brim/internal/failrun"
	"github.com/brimnode/brim/internal/registry"
	"github.com/brimnode/brim/monitor"
	"github.com/brimnode/brim/resources"
)

var (
	// ErrUnknown is returned for a name no estimator is registered under.
	ErrUnknown = errors.New("unknown estimator")
	// ErrInvalidOption is returned for an option value that does not parse
	// or is out of range (internal/registry.ErrInvalidOption, the one
	// "invalid option" of estimators and QoS controllers).
	ErrInvalidOption = registry.ErrInvalidOption
	// ErrNotSupported is returned by a factory that cannot run on this host
	// (internal/errdefs.ErrNotSupported, the one "not supported").
	ErrNotSupported = errdefs.ErrNotSupported
)

// Estimator computes the revocable resources the node may offer now (not
// counting revocable resources already allocated), from the node's usage.
// Implementations are called from one goroutine at a time.
type Estimator interface {
	Estimate(ctx context.Context, u monitor.Usage) (Estimate, error)
}

// Estimate is an estimator's result.
type Estimate struct {
	// Revocable are the resources to offer, each marked Revocable.
	Revocable resources.Resources
	// Explanation says how the figure came about.
	Explanation Explanation
}

// Explanation is the terms of an estimate's computation, in order, so an
// operator can follow the arithmetic.
type Explanation struct {
	// Estimator is the name of the estimator that produced it.
	Estimator string
	// Summary is one sentence ("slack 1.2 cpus: allocation 3 − p95 usage
	// 1.5 − margin 0.3").
	Summary string
	Terms   []Term
}

// Term is one named quantity in an explanation.
type Term struct {
	Name  string
	Value float64
	Unit  string // "cpus", "MiB", "fraction", "s", …
	Note  string
}

// String renders the explanation as a small table (brim agent explain).
func (e Explanation) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "estimator %s: %s\n", e.Estimator, e.Summary)
	w := 0
	for _, t := range e.Terms {
		w = max(w, len(t.Name))
	}
	for _, t := range e.Terms {
		fmt.Fprintf(&b, "  %-*s %12s %-8s %s\n", w, t.Name, strconv.FormatFloat(t.Value, 'f', -1, 64), t.Unit, t.Note)
	}
	return b.String()
}

// Options are an estimator's configuration, from agent flags
// (--estimator-opt key=value) or a config file. Getters return errors
// wrapping ErrInvalidOption.
type Options = registry.Options

// ParseOptions parses "k=v" pairs (repeated flags) into Options.
func ParseOptions(kvs []string) (Options, error) { return registry.ParseOptions(kvs) }

// Factory builds an estimator from its options. log is already named.
type Factory = registry.Factory[Estimator]

// Registry maps names to estimator factories (internal/registry's one
// registry type). Build it in cmd with NewRegistry; safe for concurrent
// use. Register panics on a nil factory or an empty, duplicate or
// "plugin:" name; New returns an error wrapping ErrUnknown for a name
// nothing is registered under.
type Registry = registry.Registry[Estimator]

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return registry.New(registry.Kind[Estimator]{
		Name: "estimator", Component: "estimator", Key: "estimator", Unknown: ErrUnknown,
		Plugin: func(p registry.PluginOptions, log *slog.Logger) Estimator {
			return NewPlugin(p.Path, PluginConfig{Args: p.Args, Timeout: p.Timeout, StartTimeout: p.StartTimeout,
				MinBackoff: p.MinBackoff, MaxBackoff: p.MaxBackoff, History: p.History}, log)
		},
	})
}

// RegisterBuiltins registers noop, fixed, usage and idle on r.
func RegisterBuiltins(r *Registry) {
	r.Register("noop", NewNoop)
	r.Register("fixed", NewFixed)
	r.Register("usage", NewUsage)
	r.Register("idle", NewIdle)
}

// Open builds the estimator named by spec, the value of --estimator: a
// registered name ("usage") or "plugin:/path/to/bin [args…]" for an
// out-of-process plugin (options are then passed as plugin options:
// timeout, start-timeout, min-backoff, max-backoff, history). The caller
// closes the result if it implements io.Closer (plugins do).
func Open(r *Registry, spec string, opts Options, log *slog.Logger) (Estimator, error) {
	return r.Open(spec, opts, log)
}

// revocable returns cpus and mem (MiB) as revocable resources.
func revocable(cpus, memMiB float64) resources.Resources {
	var r resources.Resources
	if v := resources.FromFloat(cpus); v > 0 {
		r = append(r, resources.Resource{Name: resources.CPUs, Type: resources.Scalar, Scalar: v, Revocable: true})
	}
	if v := resources.FromFloat(memMiB); v > 0 {
		r = append(r, resources.Resource{Name: resources.Mem, Type: resources.Scalar, Scalar: v, Revocable: true})
	}
	return r
}

// MarkRevocable returns a copy of r with every resource marked revocable.
func MarkRevocable(r resources.Resources) resources.Resources {
	out := make(resources.Resources, len(r))
	for i, x := range r {
		x.Revocable = true
		out[i] = x
	}
	return out
}

const mib = 1 << 20

// Fallback wraps e so that an error is answered with an empty estimate
// (offer nothing) whose explanation names the failure. Failures are
// logged per run (internal/failrun): the first at once, then at most one
// warning a minute, and the recovery. The returned estimator never fails
// unless ctx is done.
func Fallback(e Estimator, log *slog.Logger) Estimator {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &fallback{e: e, log: log}
}

type fallback struct {
	e     Estimator
	log   *slog.Logger
	fails failrun.Logger
}

func (f *fallback) Estimate(ctx context.Context, u monitor.Usage) (Estimate, error) {
	est, err := f.e.Estimate(ctx, u)
	if err == nil {
		f.fails.Success(f.log, "estimator recovered")
		return est, nil
	}
	if ctx.Err() != nil {
		return Estimate{}, err
	}
	f.fails.Failure(f.log, "estimator failed; offering nothing this round", err, time.Now())
	return Estimate{Explanation: Explanation{
		Estimator: "noop",
		Summary:   "estimator failed, falling back to noop (offer nothing): " + err.Error(),
	}}, nil
}

// Close closes the wrapped estimator if it is an io.Closer.
func (f *fallback) Close() error { return closeIf(f.e) }

// Blocker reports why revocable resources must not be offered now; the
// empty string means they may. qos.Applier implements it (non-empty while
// corrections are in force).
type Blocker interface {
	Blocking() string
}

// Guard wraps e so that nothing is offered while b blocks: the estimate is
// empty and its explanation says why (e is not called).
func Guard(e Estimator, b Blocker) Estimator { return &guard{e: e, b: b} }

type guard struct {
	e Estimator
	b Blocker
}

// guardName is the Explanation.Estimator of a guard's empty estimate.
const guardName = "guard"

// Blocked reports whether est is a Guard's empty estimate: computed while
// its Blocker blocked, it says nothing of what may be offered once that
// has ended.
func Blocked(est Estimate) bool { return est.Explanation.Estimator == guardName }

func (g *guard) Estimate(ctx context.Context, u monitor.Usage) (Estimate, error) {
	if why := g.b.Blocking(); why != "" {
		return Estimate{Explanation: Explanation{
			Estimator: guardName,
			Summary:   "offering nothing new while QoS corrections are in force: " + why,
		}}, nil
	}
	return g.e.Estimate(ctx, u)
}

// Close closes the wrapped estimator if it is an io.Closer.
func (g *guard) Close() error { return closeIf(g.e) }

func closeIf(e Estimator) error {
	if c, ok := e.(interface{ Close() error }); ok {
		return c.Close()
	}
	return nil
}
