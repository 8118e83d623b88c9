package registry

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ParseOptions parses "k=v" pairs (repeated --estimator-opt / --qos-opt
// flags) into a map; a pair without "=" or with an empty key is an error
// wrapping invalid (the kind's ErrInvalidOption).
func ParseOptions(kvs []string, invalid error) (map[string]string, error) {
	o := map[string]string{}
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("option %q is not key=value: %w", kv, invalid)
		}
		o[k] = v
	}
	return o, nil
}

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
// wrap invalid and name every bad option.
func ParsePlugin(spec string, opts map[string]string, invalid error) (p PluginOptions, ok bool, err error) {
	rest, ok := strings.CutPrefix(spec, PluginPrefix)
	if !ok {
		return PluginOptions{}, false, nil
	}
	f := strings.Fields(rest)
	if len(f) == 0 {
		return PluginOptions{}, true, fmt.Errorf("empty plugin path: %w", invalid)
	}
	p.Path, p.Args = f[0], f[1:]
	var errs []error
	duration := func(key string) time.Duration {
		v := opts[key]
		if v == "" {
			return 0
		}
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			errs = append(errs, fmt.Errorf("option %s=%q: %w", key, v, invalid))
		}
		return d
	}
	p.Timeout = duration("timeout")
	p.StartTimeout = duration("start-timeout")
	p.MinBackoff = duration("min-backoff")
	p.MaxBackoff = duration("max-backoff")
	if v := opts["history"]; v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			errs = append(errs, fmt.Errorf("option history=%q: %w", v, invalid))
		}
		p.History = n
	}
	return p, true, errors.Join(errs...)
}
