package registry

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Options are a plugin's configuration, from agent flags (--estimator-opt,
// --qos-opt key=value) or a config file. Getters return errors wrapping
// ErrInvalidOption.
type Options map[string]string

// ParseOptions parses "k=v" pairs (repeated --estimator-opt / --qos-opt
// flags) into Options; a pair without "=" or with an empty key is an
// error wrapping ErrInvalidOption.
func ParseOptions(kvs []string) (Options, error) {
	o := Options{}
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("option %q is not key=value: %w", kv, ErrInvalidOption)
		}
		o[k] = v
	}
	return o, nil
}

// get parses key with parse, or returns def when it is unset or empty.
func get[V any](o Options, key string, def V, parse func(string) (V, error)) (V, error) {
	v, ok := o[key]
	if !ok || v == "" {
		return def, nil
	}
	x, err := parse(v)
	if err != nil {
		return x, fmt.Errorf("option %s=%q: %w", key, v, ErrInvalidOption)
	}
	return x, nil
}

// Float returns key as a float, or def when unset.
func (o Options) Float(key string, def float64) (float64, error) {
	return get(o, key, def, func(v string) (float64, error) { return strconv.ParseFloat(v, 64) })
}

// Int returns key as an int, or def when unset.
func (o Options) Int(key string, def int) (int, error) {
	return get(o, key, def, strconv.Atoi)
}

// Duration returns key as a non-negative time.Duration ("30s"), or def
// when unset.
func (o Options) Duration(key string, def time.Duration) (time.Duration, error) {
	return get(o, key, def, func(v string) (time.Duration, error) {
		d, err := time.ParseDuration(v)
		if err == nil && d < 0 {
			err = errors.New("negative")
		}
		return d, err
	})
}

// Bool returns key as a bool, or def when unset.
func (o Options) Bool(key string, def bool) (bool, error) {
	return get(o, key, def, strconv.ParseBool)
}

// Reader returns a reader of o's options that collects every error, so a
// factory reads all its options and checks once (Reader.Err).
func (o Options) Reader() *OptionReader { return &OptionReader{o: o} }

// OptionReader reads options and collects their errors. Not safe for
// concurrent use.
type OptionReader struct {
	o    Options
	errs []error
}

func (r *OptionReader) keep(err error) {
	if err != nil {
		r.errs = append(r.errs, err)
	}
}

// Float is Options.Float, its error kept for Err.
func (r *OptionReader) Float(key string, def float64) float64 {
	v, err := r.o.Float(key, def)
	r.keep(err)
	return v
}

// Int is Options.Int, its error kept for Err.
func (r *OptionReader) Int(key string, def int) int {
	v, err := r.o.Int(key, def)
	r.keep(err)
	return v
}

// Duration is Options.Duration, its error kept for Err.
func (r *OptionReader) Duration(key string, def time.Duration) time.Duration {
	v, err := r.o.Duration(key, def)
	r.keep(err)
	return v
}

// Bool is Options.Bool, its error kept for Err.
func (r *OptionReader) Bool(key string, def bool) bool {
	v, err := r.o.Bool(key, def)
	r.keep(err)
	return v
}

// Fail records an error of the caller's own (a removed option, say).
func (r *OptionReader) Fail(err error) { r.keep(err) }

// Err returns every error read so far, joined (nil if none); each names
// its option and wraps ErrInvalidOption.
func (r *OptionReader) Err() error { return errors.Join(r.errs...) }

// PluginOptions is an out-of-process plugin named by a "plugin:" spec and
// the options every plugin kind takes; zero values mean the kind's
// defaults.
type PluginOptions struct {
	Path string
	Args []string
	// Options "timeout", "start-timeout", "min-backoff", "max-backoff"
	// (durations) and "history" (samples per container).
	Timeout, StartTimeout, MinBackoff, MaxBackoff time.Duration
	History                                       int
}

// ParsePlugin parses spec when it starts with PluginPrefix ("plugin:/path
// [args…]"; ok is false otherwise) and the plugin options in opts. Errors
// wrap ErrInvalidOption and name every bad option.
func ParsePlugin(spec string, opts Options) (p PluginOptions, ok bool, err error) {
	rest, ok := strings.CutPrefix(spec, PluginPrefix)
	if !ok {
		return PluginOptions{}, false, nil
	}
	f := strings.Fields(rest)
	if len(f) == 0 {
		return PluginOptions{}, true, fmt.Errorf("empty plugin path: %w", ErrInvalidOption)
	}
	p.Path, p.Args = f[0], f[1:]
	r := opts.Reader()
	p.Timeout = r.Duration("timeout", 0)
	p.StartTimeout = r.Duration("start-timeout", 0)
	p.MinBackoff = r.Duration("min-backoff", 0)
	p.MaxBackoff = r.Duration("max-backoff", 0)
	if p.History = r.Int("history", 0); p.History < 0 {
		r.Fail(fmt.Errorf("option history=%q: %w", opts["history"], ErrInvalidOption))
	}
	return p, true, r.Err()
}
