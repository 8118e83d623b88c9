package registry

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
)

// PluginPrefix marks an out-of-process plugin spec ("plugin:/path/to/bin");
// no factory may be registered under a name starting with it.
const PluginPrefix = "plugin:"

// ErrInvalidOption is returned for an option value that does not parse or
// is out of range. estimator.ErrInvalidOption and qos.ErrInvalidOption are
// this one sentinel.
var ErrInvalidOption = errors.New("invalid option")

// Factory builds a plugin of type T from its options; log is already named
// (component and plugin name).
type Factory[T any] func(opts Options, log *slog.Logger) (T, error)

// Kind describes the plugins one Registry holds.
type Kind[T any] struct {
	// Name names the kind in errors ("estimator", "qos controller").
	Name string
	// Component and Key name a plugin's logger:
	// log.With("component", Component, Key, name). Component also
	// prefixes panic messages.
	Component, Key string
	// Unknown is the kind's sentinel for a name nothing is registered
	// under (estimator.ErrUnknown, qos.ErrUnknown).
	Unknown error
	// Plugin returns the out-of-process plugin named by a "plugin:" spec
	// (nil: such specs are refused as unknown).
	Plugin func(p PluginOptions, log *slog.Logger) T
}

// Registry maps names to the factories of one kind of plugin (T is the
// kind's contract: estimator.Estimator, qos.Controller). Build one per kind
// in cmd; there is no package-level registry. Safe for concurrent use.
type Registry[T any] struct {
	kind Kind[T]
	mu   sync.RWMutex
	m    map[string]Factory[T]
}

// New returns an empty registry of kind k.
func New[T any](k Kind[T]) *Registry[T] {
	return &Registry[T]{kind: k, m: map[string]Factory[T]{}}
}

// Register adds f under name. It panics on a nil factory, an empty or
// duplicate name, or a name starting with PluginPrefix (a programming
// error in cmd).
func (r *Registry[T]) Register(name string, f Factory[T]) {
	if f == nil {
		panic(r.kind.Component + ": Register with a nil factory")
	}
	if name == "" || strings.HasPrefix(name, PluginPrefix) {
		panic(r.kind.Component + ": Register with an empty name or plugin: prefix")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.m[name]; dup {
		panic(r.kind.Component + ": duplicate Register of " + name)
	}
	r.m[name] = f
}

// Lookup returns the factory registered as name.
func (r *Registry[T]) Lookup(name string) (Factory[T], bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	f, ok := r.m[name]
	return f, ok
}

// Names returns the registered names, sorted.
func (r *Registry[T]) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := make([]string, 0, len(r.m))
	for n := range r.m {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// New builds the plugin registered as name with a logger named after it;
// an error wrapping the kind's Unknown if none is, else the factory's
// error (options wrap ErrInvalidOption).
func (r *Registry[T]) New(name string, opts Options, log *slog.Logger) (T, error) {
	var zero T
	f, ok := r.Lookup(name)
	if !ok {
		return zero, fmt.Errorf("new %s %q (have %s): %w", r.kind.Name, name, strings.Join(r.Names(), ", "), r.kind.Unknown)
	}
	p, err := f(opts, r.logger(log, name))
	if err != nil {
		return zero, fmt.Errorf("new %s %q: %w", r.kind.Name, name, err)
	}
	return p, nil
}

// Open builds the plugin named by spec, the value of --estimator or
// --qos: a registered name, or "plugin:/path/to/bin [args…]" for an
// out-of-process plugin, whose options are then the plugin options
// (ParsePlugin: timeout, start-timeout, min-backoff, max-backoff,
// history). The caller closes the result if it implements io.Closer
// (plugins do). Errors are New's, or wrap ErrInvalidOption for a bad
// plugin spec.
func (r *Registry[T]) Open(spec string, opts Options, log *slog.Logger) (T, error) {
	p, ok, err := ParsePlugin(spec, opts)
	if !ok || r.kind.Plugin == nil {
		return r.New(spec, opts, log)
	}
	if err != nil {
		var zero T
		return zero, fmt.Errorf("open %s %q: %w", r.kind.Name, spec, err)
	}
	return r.kind.Plugin(p, r.logger(log, spec)), nil
}

// logger names log after the kind and the plugin (a discarding logger for
// nil).
func (r *Registry[T]) logger(log *slog.Logger, name string) *slog.Logger {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return log.With("component", r.kind.Component, r.kind.Key, name)
}
