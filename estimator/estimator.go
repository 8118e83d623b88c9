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
	// or is out of range.
	ErrInvalidOption = errors.New("invalid estimator option")
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
type Options map[string]string

// Float returns key as a float, or def when unset.
func (o Options) Float(key string, def float64) (float64, error) {
	v, ok := o[key]
	if !ok || v == "" {
		return def, nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return 0, fmt.Errorf("option %s=%q: %w", key, v, ErrInvalidOption)
	}
	return f, nil
}

// Int returns key as an int, or def when unset.
func (o Options) Int(key string, def int) (int, error) {
	v, ok := o[key]
	if !ok || v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("option %s=%q: %w", key, v, ErrInvalidOption)
	}
	return n, nil
}

// Duration returns key as a time.Duration ("30s"), or def when unset.
func (o Options) Duration(key string, def time.Duration) (time.Duration, error) {
	v, ok := o[key]
	if !ok || v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("option %s=%q: %w", key, v, ErrInvalidOption)
	}
	return d, nil
}

// Bool returns key as a bool, or def when unset.
func (o Options) Bool(key string, def bool) (bool, error) {
	v, ok := o[key]
	if !ok || v == "" {
		return def, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("option %s=%q: %w", key, v, ErrInvalidOption)
	}
	return b, nil
}

// optionReader reads several options and keeps the first error, so a
// factory reads them all and checks once.
type optionReader struct {
	o   Options
	err error
}

func (r *optionReader) keep(err error) {
	if r.err == nil {
		r.err = err
	}
}

func (r *optionReader) float(key string, def float64) float64 {
	v, err := r.o.Float(key, def)
	r.keep(err)
	return v
}

func (r *optionReader) int(key string, def int) int {
	v, err := r.o.Int(key, def)
	r.keep(err)
	return v
}

func (r *optionReader) duration(key string, def time.Duration) time.Duration {
	v, err := r.o.Duration(key, def)
	r.keep(err)
	return v
}

func (r *optionReader) bool(key string, def bool) bool {
	v, err := r.o.Bool(key, def)
	r.keep(err)
	return v
}

// ParseOptions parses "k=v" pairs (repeated flags) into Options.
func ParseOptions(kvs []string) (Options, error) {
	o, err := registry.ParseOptions(kvs, ErrInvalidOption)
	return Options(o), err
}

// Factory builds an estimator from its options. log is already named.
type Factory func(opts Options, log *slog.Logger) (Estimator, error)

// Registry maps names to estimator factories. Build it in cmd; safe for
// concurrent use.
type Registry struct {
	r *registry.Registry[Factory]
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{r: registry.New[Factory]("estimator")} }

// RegisterBuiltins registers noop, fixed, usage and idle on r.
func RegisterBuiltins(r *Registry) {
	r.Register("noop", NewNoop)
	r.Register("fixed", NewFixed)
	r.Register("usage", NewUsage)
	r.Register("idle", NewIdle)
}

// Register adds f under name. It panics on an empty or duplicate name or a
// name starting with "plugin:" (a programming error in cmd).
func (r *Registry) Register(name string, f Factory) {
	if f == nil {
		panic("estimator: Register with a nil factory")
	}
	r.r.Register(name, f)
}

// Names returns the registered names, sorted.
func (r *Registry) Names() []string { return r.r.Names() }

// New builds the estimator registered as name; ErrUnknown if none.
func (r *Registry) New(name string, opts Options, log *slog.Logger) (Estimator, error) {
	f, ok := r.r.Lookup(name)
	if !ok {
		return nil, fmt.Errorf("new estimator %q (have %s): %w", name, strings.Join(r.Names(), ", "), ErrUnknown)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	e, err := f(opts, log.With("component", "estimator", "estimator", name))
	if err != nil {
		return nil, fmt.Errorf("new estimator %q: %w", name, err)
	}
	return e, nil
}

// Open builds the estimator named by spec, the value of --estimator: a
// registered name ("usage") or "plugin:/path/to/bin [args…]" for an
// out-of-process plugin (options are then passed as plugin options:
// timeout, min-backoff, max-backoff, history). The caller closes the
// result if it implements io.Closer (plugins do).
func Open(r *Registry, spec string, opts Options, log *slog.Logger) (Estimator, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if p, ok, err := registry.ParsePlugin(spec, opts, ErrInvalidOption); ok {
		if err != nil {
			return nil, fmt.Errorf("open estimator %q: %w", spec, err)
		}
		cfg := PluginConfig{Args: p.Args, Timeout: p.Timeout, StartTimeout: p.StartTimeout,
			MinBackoff: p.MinBackoff, MaxBackoff: p.MaxBackoff, History: p.History}
		return NewPlugin(p.Path, cfg, log.With("component", "estimator", "estimator", spec)), nil
	}
	return r.New(spec, opts, log)
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

func (g *guard) Estimate(ctx context.Context, u monitor.Usage) (Estimate, error) {
	if why := g.b.Blocking(); why != "" {
		return Estimate{Explanation: Explanation{
			Estimator: "guard",
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
