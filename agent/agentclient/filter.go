package agentclient

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/brimnode/brim/agent/agentpb"
)

// Filter selects containers as `docker ps --filter` does: filters of one
// key match when any of them matches (state=running and state=paused:
// either), filters of different keys when all of theirs do; label
// filters are the exception, as in Docker: each must match. Keys: id (an
// ID prefix), name (a regular expression searched in the name, as
// Docker's), label (KEY or KEY=VALUE), state or Docker's status (running,
// paused, frozen, exited: State's words), revocable (true or false),
// exited (an exit code). The zero Filter selects everything.
type Filter struct {
	byKey  map[string][]string
	names  []*regexp.Regexp
	labels []labelFilter
}

// labelFilter is label=KEY (any value) or label=KEY=VALUE.
type labelFilter struct {
	key, value string
	hasValue   bool
}

// FilterKeys are the keys ParseFilters accepts.
var FilterKeys = []string{"exited", "id", "label", "name", "revocable", "state"}

// ParseFilters reads --filter KEY=VALUE arguments; the error names the
// bad one and the keys there are.
func ParseFilters(args []string) (Filter, error) {
	f := Filter{byKey: map[string][]string{}}
	for _, a := range args {
		k, v, ok := strings.Cut(a, "=")
		k = strings.ToLower(strings.TrimSpace(k))
		if k == "status" { // Docker's name of it
			k = "state"
		}
		if !ok || !slices.Contains(FilterKeys, k) {
			return Filter{}, fmt.Errorf("--filter %q: want KEY=VALUE with KEY one of %s", a, strings.Join(FilterKeys, ", "))
		}
		switch k {
		case "name":
			re, err := regexp.Compile(v)
			if err != nil {
				return Filter{}, fmt.Errorf("--filter %q: %w", a, err)
			}
			f.names = append(f.names, re)
		case "label":
			lk, lv, has := strings.Cut(v, "=")
			if lk == "" {
				return Filter{}, fmt.Errorf("--filter %q: want label=KEY or label=KEY=VALUE", a)
			}
			f.labels = append(f.labels, labelFilter{key: lk, value: lv, hasValue: has})
		case "state":
			if !slices.Contains([]string{"running", "paused", "frozen", "exited"}, v) {
				return Filter{}, fmt.Errorf("--filter %q: want state=running, paused, frozen or exited", a)
			}
		case "revocable":
			if v != "true" && v != "false" {
				return Filter{}, fmt.Errorf("--filter %q: want revocable=true or revocable=false", a)
			}
		}
		f.byKey[k] = append(f.byKey[k], v)
	}
	return f, nil
}

// Match reports whether c passes f.
func (f Filter) Match(c *agentpb.Container) bool {
	for _, l := range f.labels {
		v, ok := c.Labels[l.key]
		if !ok || (l.hasValue && v != l.value) {
			return false
		}
	}
	if len(f.names) > 0 && !slices.ContainsFunc(f.names, func(re *regexp.Regexp) bool { return re.MatchString(c.Name) }) {
		return false
	}
	anyOf := func(key string, match func(string) bool) bool {
		vs := f.byKey[key]
		return len(vs) == 0 || slices.ContainsFunc(vs, match)
	}
	return anyOf("id", func(v string) bool { return strings.HasPrefix(c.Id, v) }) &&
		anyOf("state", func(v string) bool { return State(c) == v }) &&
		anyOf("revocable", func(v string) bool { return (v == "true") == c.Revocable }) &&
		anyOf("exited", func(v string) bool { return c.Exit != nil && fmt.Sprint(ExitCode(c)) == v })
}
