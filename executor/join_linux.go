package executor

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/opencontainers/cgroups"
	"github.com/opencontainers/cgroups/fs"
	"github.com/opencontainers/runc/libcontainer"
	"github.com/opencontainers/runc/libcontainer/configs"
	"github.com/opencontainers/runc/libcontainer/configs/validate"
)

// On cgroup v1 (and hybrid) hosts the shim, not libcontainer, puts the
// container's init into its cgroups, and does it late: once the init has
// set the container up and waits to exec the user process, before that
// process runs.
//
// Why: moving a process into a cgroup takes the kernel's global
// cgroup_threadgroup_rwsem for writing, and when nobody has for a while
// that first waits out an RCU grace period: 6 ms median, up to 20 ms,
// measured on this kind of VM against 0.1 ms for a move right after
// another (see isolator/cgroups.Isolator.Warm). libcontainer moves the
// init as its first step, before anything else can happen, so a launch
// (brim's or `runc run`'s) sits idle for the whole grace period. The
// agent's cgroup isolator keeps the lock warm from the moment the
// container's groups exist; by the time the init is ready (≈ 25 ms
// later) the grace period has passed in the background and the move
// costs what a move costs. Measured in paired rounds (bench/10-launch):
// the shim's launch fell from 42 to 32 ms median, `brim container run`
// end to end by 11 ms.
//
// What it changes: the init does its set-up (mounts, pivot_root, seccomp
// compilation) in the shim's cgroups rather than the container's, so its
// CPU time, and the memory it frees at exec, count against the agent's
// groups (on a loaded host the set-up runs at the agent's CPU weight, not
// at a revocable container's 10 shares per cpu). The user process never
// runs outside: the shim moves the init
// into every hierarchy libcontainer would have joined (the same
// opencontainers/cgroups manager and paths), writes the device rules
// libcontainer would have written (concurrently with the set-up, into a
// group that has no process yet), and checks the result
// (verifyConfinement) before it opens the exec fifo. It removes the
// groups after the container has exited, as libcontainer's Destroy did.
//
// libcontainer is told nothing of the groups: the shim creates the
// container from a state (Load) whose cgroup manager has no paths, the
// one way its API offers to make it skip its own join. On a cgroup v2
// host none of this applies (no thread of the agent can hold the lock
// warm there: a v2 domain group takes whole processes only) and
// libcontainer joins as usual.

// unjoinedKey is the single entry of the cgroup paths in the state an
// unjoined container is loaded from: the state file omits an empty map
// (Load would then compute the real paths and join them), and a key that
// names no subsystem is skipped by every step of libcontainer's v1
// manager (its Destroy removes the empty path: nothing).
const unjoinedKey = "brim-joins-itself"

// joinLate reports whether the shim joins the container's cgroups itself
// (cgroup v1 and hybrid hosts).
func joinLate() bool { return !cgroups.IsCgroup2UnifiedMode() }

// cgroupJoin is the shim's own handle on the container's cgroups, for a
// late join.
type cgroupJoin struct {
	cg      *cgroups.Cgroup
	m       cgroups.Manager
	devices chan error        // the device rules being written; one value
	rest    map[string]string // hierarchies a warm sandbox joins at its claim
}

// devicesSetV1 returns opencontainers/cgroups' v1 device-rule writer and
// takes it from the package variable through which every cgroup manager
// in the process calls it (the first call does; the shim runs one
// container). libcontainer's manager for an unjoined container has no
// devices group and, given no rules, skips the devices when there is no
// writer; with one, it fails ("cannot set devices limit"). The shim
// writes the container's rules itself, with this writer.
var devicesSetV1 = sync.OnceValue(func() func(string, *cgroups.Resources) error {
	set := cgroups.DevicesSetV1
	cgroups.DevicesSetV1 = nil
	return set
})

// startCgroupJoin makes the handle for the groups of cfg.Cgroups (the
// paths libcontainer would use) and starts writing the device rules of
// cfg (what libcontainer's Set writes: the only cgroup settings in a brim
// config, the isolators own the rest).
func startCgroupJoin(cfg *configs.Config) (*cgroupJoin, error) {
	m, err := managerAt(cfg.Cgroups)
	if err != nil {
		return nil, fmt.Errorf("cgroup manager: %w", err)
	}
	set := devicesSetV1()
	if set == nil {
		return nil, errors.New("cgroup manager: no v1 device rule support compiled in")
	}
	j := &cgroupJoin{cg: cfg.Cgroups, m: m}
	j.writeDevices(m.Path("devices"), cfg.Cgroups.Resources, set)
	return j, nil
}

// writeDevices starts writing the device rules res into the devices
// group dir with set; waitDevices returns the outcome. The writer sends
// on a channel of its own: waitDevices takes j.devices away (nil) before
// it receives, and a send on the field read after that would block for
// ever — and the shim with it (a launch whose cgroup view failed waited
// there until killed).
func (j *cgroupJoin) writeDevices(dir string, res *cgroups.Resources, set func(string, *cgroups.Resources) error) {
	ch := make(chan error, 1)
	j.devices = ch
	go func() {
		// The cgroup isolator has made the group; like libcontainer's
		// join, do not depend on it.
		if err := os.MkdirAll(dir, 0o755); err != nil {
			ch <- err
			return
		}
		ch <- set(dir, res)
	}()
}

// hierarchyRoots are the root directories of the v1 hierarchies the
// cgroup manager joins (subsystem name, "name=systemd", "" for the
// unified tree of a hybrid host), found once per process: finding them
// (mountinfo, a stat per subsystem) took 170 µs of every launch and claim
// on an idle host. Hierarchies are mounted at boot, before any agent
// starts; a shim lives for one container.
var hierarchyRoots = sync.OnceValues(func() (map[string]string, error) {
	m, err := fs.NewManager(&cgroups.Cgroup{Path: "/", Resources: &cgroups.Resources{}}, nil)
	if err != nil {
		return nil, err
	}
	return m.GetPaths(), nil
})

// managerAt returns opencontainers/cgroups' v1 manager for cg, whose
// path is absolute: its group in each hierarchy is that path below the
// hierarchy's root, as the manager itself computes it (fs.initPaths,
// subsysPath), from the roots found once.
func managerAt(cg *cgroups.Cgroup) (*fs.Manager, error) {
	if !filepath.IsAbs(cg.Path) {
		return nil, fmt.Errorf("cgroup path %q is not absolute", cg.Path)
	}
	roots, err := hierarchyRoots()
	if err != nil {
		return nil, err
	}
	paths := make(map[string]string, len(roots))
	for h, root := range roots {
		paths[h] = filepath.Join(root, cg.Path)
	}
	return fs.NewManager(cg, paths)
}

// unjoinedConfig returns a copy of cfg for libcontainer when the shim
// joins the cgroups itself: without device rules (see devicesSetV1).
func unjoinedConfig(cfg *configs.Config) *configs.Config {
	c := *cfg
	cg := *cfg.Cgroups
	res := *cg.Resources
	res.Devices = nil
	cg.Resources = &res
	c.Cgroups = &cg
	return &c
}

// join waits for the device rules, then moves pid into every group; a
// warm sandbox's init into every group but the unified one of a hybrid
// host, which cannot be renamed to the container's name at the claim
// (cgroup v2 has no rename) and is joined then (joinRest).
func (j *cgroupJoin) join(pid int, warm bool) error {
	if err := j.waitDevices(); err != nil {
		return err
	}
	m := j.m
	if warm {
		paths := j.m.GetPaths()
		if u, ok := paths[""]; ok {
			delete(paths, "")
			j.rest = map[string]string{"": u}
			var err error
			if m, err = fs.NewManager(j.cg, paths); err != nil {
				return fmt.Errorf("join cgroups: %w", err)
			}
			j.m = m
		}
	}
	if err := m.Apply(pid); err != nil {
		return fmt.Errorf("join cgroups: %w", err)
	}
	return nil
}

// joined returns the hierarchies pid was put in (subsystem names, "" for
// the unified tree of a hybrid host).
func (j *cgroupJoin) joined() []string {
	var hs []string
	for h := range j.m.GetPaths() {
		hs = append(hs, h)
	}
	return hs
}

// claim moves the handle of a warm sandbox's groups to the container's
// cgroup path (their v1 directories were renamed to it by the cgroup
// isolator) and joins pid to the hierarchies the sandbox left out (see
// join).
func (j *cgroupJoin) claim(path string, pid int) error {
	cg := *j.cg
	cg.Path = path
	m, err := managerAt(&cg)
	if err != nil {
		return fmt.Errorf("join cgroups: %w", err)
	}
	all := m.GetPaths()
	rest := make(map[string]string)
	for h := range j.rest {
		if p, ok := all[h]; ok {
			rest[h] = p
		}
	}
	if len(rest) > 0 {
		r, err := fs.NewManager(&cg, rest)
		if err == nil {
			err = r.Apply(pid)
		}
		if err != nil {
			return fmt.Errorf("join cgroups: %w", err)
		}
	}
	j.cg, j.m, j.rest = &cg, m, nil
	return nil
}

// waitDevices returns the outcome of the device rules' writing (once; nil
// afterwards).
func (j *cgroupJoin) waitDevices() error {
	ch := j.devices
	if ch == nil {
		return nil
	}
	j.devices = nil
	if err := <-ch; err != nil {
		return fmt.Errorf("set device rules: %w", err)
	}
	return nil
}

// paths returns the group of each hierarchy (subsystem name, "" for the
// unified tree of a hybrid host).
func (j *cgroupJoin) paths() map[string]string { return j.m.GetPaths() }

// destroy removes the groups (after the container has exited or its
// launch failed).
func (j *cgroupJoin) destroy() error {
	_ = j.waitDevices()
	return j.m.Destroy()
}

// createUnjoined is libcontainer.Create for a container whose cgroups
// the shim joins itself (see cgroupJoin): the same validation and state
// directory, then a Load of a state that names no cgroup paths and no
// device rules. It returns libcontainer.ErrExist when id's state
// directory exists, and removes what it made on any error.
func createUnjoined(root, id string, cfg *configs.Config) (*libcontainer.Container, error) {
	if err := validate.Validate(cfg); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, err
	}
	dir := filepath.Join(root, id) // id is a validated bundle ID
	if err := os.Mkdir(dir, 0o711); err != nil {
		if errors.Is(err, os.ErrExist) {
			return nil, libcontainer.ErrExist
		}
		return nil, err
	}
	st := libcontainer.State{
		BaseState:   libcontainer.BaseState{ID: id, Created: time.Now().UTC(), Config: *unjoinedConfig(cfg)},
		CgroupPaths: map[string]string{unjoinedKey: ""},
	}
	data, err := json.Marshal(&st)
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "state.json"), data, 0o600)
	}
	if err == nil {
		var c *libcontainer.Container
		if c, err = libcontainer.Load(root, id); err == nil {
			return c, nil
		}
	}
	_ = os.RemoveAll(dir)
	return nil, fmt.Errorf("create container state: %w", err)
}
