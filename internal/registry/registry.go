package registry

import (
	"slices"
	"strings"
	"sync"
)

// PluginPrefix marks an out-of-process plugin spec ("plugin:/path/to/bin");
// no factory may be registered under a name starting with it.
const PluginPrefix = "plugin:"

// Registry maps names to factories of type F. Safe for concurrent use.
type Registry[F any] struct {
	kind string
	mu   sync.RWMutex
	m    map[string]F
}

// New returns an empty registry; kind ("estimator", "qos") names it in
// panic messages.
func New[F any](kind string) *Registry[F] {
	return &Registry[F]{kind: kind, m: map[string]F{}}
}

// Register adds f under name. It panics on an empty or duplicate name or a
// name starting with PluginPrefix (a programming error in cmd).
func (r *Registry[F]) Register(name string, f F) {
	if name == "" || strings.HasPrefix(name, PluginPrefix) {
		panic(r.kind + ": Register with an empty name or plugin: prefix")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.m[name]; dup {
		panic(r.kind + ": duplicate Register of " + name)
	}
	r.m[name] = f
}

// Lookup returns the factory registered as name.
func (r *Registry[F]) Lookup(name string) (F, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	f, ok := r.m[name]
	return f, ok
}

// Names returns the registered names, sorted.
func (r *Registry[F]) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := make([]string, 0, len(r.m))
	for n := range r.m {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
