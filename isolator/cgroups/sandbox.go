package cgroups

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/brimnode/brim/isolator"
)

var _ isolator.Sandboxer = (*Isolator)(nil)

// PrepareSandbox implements isolator.Sandboxer: the groups of a warm
// sandbox, made as Prepare makes a container's (every v1 controller brim
// uses, cpuset copied down so that they can be joined) with no limit
// written, not even the default pids.max. Errors wrap ErrInvalid or the
// mkdir's error.
func (i *Isolator) PrepareSandbox(ctx context.Context, name string, launch *isolator.Launch) error {
	if err := validID(name); err != nil {
		return fmt.Errorf("prepare sandbox %s: %w", name, err)
	}
	if err := i.setup(); err != nil {
		return fmt.Errorf("prepare sandbox %s: %w", name, err)
	}
	g := i.group(name, true)
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := i.makeGroups(i.Path(name)); err != nil {
		return fmt.Errorf("prepare sandbox %s: %w", name, err)
	}
	g.spec = nil
	if launch != nil {
		launch.CgroupPath = i.Path(name)
	}
	return nil
}

// makeGroups creates cgroup path p in every hierarchy brim uses.
func (i *Isolator) makeGroups(p string) error {
	if i.version == V2 {
		return mkdir(i.dir("", p))
	}
	for _, c := range v1Create {
		if !exists(filepath.Join(i.root, c)) {
			continue
		}
		if err := mkdir(i.dir(c, p)); err != nil {
			return err
		}
		if c == "cpuset" {
			if err := i.cpusetDown(p); err != nil {
				return err
			}
		}
	}
	return nil
}

// Claim implements isolator.Sandboxer. On cgroup v1 the sandbox's
// directories are renamed to the container's in every hierarchy that has
// one (a rename moves no process and waits for nothing: the init stays
// where it is, under the new name); the unified directory of a hybrid
// host, which cannot be renamed, the runtime joins at the claim (the
// sandbox never joined one). On v2, which cannot rename a group, the
// container keeps the sandbox's group, the one its init is in and its
// cgroup namespace is rooted at (a task reads "0::/" and its own limits
// in /sys/fs/cgroup, as a cold launch's): Path(id) names it from then on,
// and Cleanup(id) removes it. Then the limits are written as Prepare
// writes them (before the task's exec), and on v1 the counters a task
// reads (memory.max_usage_in_bytes, cpuacct.usage) start from zero as a
// new group's do (on v2 a cold launch's group, which its init joins
// before its set-up, counts the set-up too). Errors wrap ErrInvalid,
// isolator.ErrNotFound (no such sandbox), isolator.ErrNotSupported, or
// the write's error.
func (i *Isolator) Claim(ctx context.Context, name, id string, limits isolator.Limits, launch *isolator.Launch) error {
	spec := Spec{Limits: limits}
	if err := validID(name); err != nil {
		return fmt.Errorf("claim %s for %s: %w", name, id, err)
	}
	if err := i.validate(id, spec); err != nil {
		return fmt.Errorf("claim %s for %s: %w", name, id, err)
	}
	if err := i.Features().check(spec); err != nil {
		return fmt.Errorf("claim %s for %s: %w", name, id, err)
	}
	spec = i.withDefaults(spec)
	if err := spec.validate(); err != nil {
		return fmt.Errorf("claim %s for %s: %w", name, id, err)
	}
	g := i.group(name, false)
	if g == nil {
		return fmt.Errorf("claim %s for %s: %w", name, id, isolator.ErrNotFound)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := i.moveGroups(name, id); err != nil {
		return fmt.Errorf("claim %s for %s: %w", name, id, err)
	}
	if i.version == V2 {
		i.aliases.Store(id, name)
	}
	i.mu.Lock()
	delete(i.groups, name)
	i.groups[id] = g
	i.mu.Unlock()
	if err := i.apply(id, Plan(i.version, i.Features(), spec, nil)); err != nil {
		return fmt.Errorf("claim %s for %s: %w", name, id, err)
	}
	g.spec = &spec
	if err := i.setLow(id, spec.MemoryLow); err != nil {
		return fmt.Errorf("claim %s for %s: %w", name, id, err)
	}
	i.resetCounters(id)
	if launch != nil {
		launch.CgroupPath = i.Path(id)
		adj := spec.OOMScoreAdj
		launch.OOMScoreAdj = &adj
	}
	return nil
}

// moveGroups renames the v1 groups of name to id (rolled back if one
// fails); on v2 the group stays name's (Claim).
func (i *Isolator) moveGroups(name, id string) error {
	if i.version == V2 {
		if !exists(i.dir("", i.Path(name))) {
			return isolator.ErrNotFound
		}
		return nil
	}
	var done [][2]string
	for _, h := range i.hierarchies() {
		if h == i.unified {
			continue
		}
		from, to := filepath.Join(h, i.Path(name)), filepath.Join(h, i.Path(id))
		if !exists(from) {
			continue
		}
		if err := os.Rename(from, to); err != nil {
			for _, d := range done {
				_ = os.Rename(d[1], d[0])
			}
			return fmt.Errorf("rename group: %w", err)
		}
		done = append(done, [2]string{from, to})
	}
	if len(done) == 0 {
		return isolator.ErrNotFound
	}
	return nil
}

// resetCounters zeroes the peak memory and cpu time of id's group (v1:
// the sandbox's init was charged for its exec of the trampoline). Best
// effort: the limits are what a task relies on.
func (i *Isolator) resetCounters(id string) {
	if i.version == V2 {
		return
	}
	for _, w := range []Write{{Controller: "memory", File: "memory.max_usage_in_bytes", Value: "0"}, {Controller: "cpuacct", File: "cpuacct.usage", Value: "0"}} {
		_ = writeFile(filepath.Join(i.dir(w.Controller, i.Path(id)), w.File), w.Value)
	}
}
