package cgroups

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/brimnode/brim/isolator"
)

// DefaultRoot is where the cgroup hierarchies are mounted.
const DefaultRoot = "/sys/fs/cgroup"

// DefaultParent is the parent of every container group.
const DefaultParent = "/brim"

// v1Create lists the v1 hierarchies a container group is created in (those
// mounted on the host), name=systemd's included: the runtime joins it too,
// and a group the runtime made itself would take cgroup_mutex while the
// cgroup-attach lock is being warmed (Warm), waiting out a grace period.
// The runtime makes the unified directory of a hybrid host when it joins.
var v1Create = []string{"cpu", "cpuacct", "cpuset", "memory", "pids", "freezer", "devices", "blkio", "systemd"}

// v2Enable lists the v2 controllers enabled for the container groups (those
// the parent has).
var v2Enable = []string{"cpuset", "cpu", "io", "memory", "pids", "hugetlb"}

// Config configures an Isolator.
type Config struct {
	// Parent is the cgroup path of the container groups' parent, relative
	// to each hierarchy's root: absolute, clean, not "/" (default "/brim").
	Parent string
	// Root is where the hierarchies are mounted (default /sys/fs/cgroup);
	// tests point it at fixture trees.
	Root string
	// DefaultPids is the pids.max of a container whose limits ask for no
	// pids limit, so that one task cannot fork-bomb the node (cmd/brim sets
	// DefaultPidsMax); 0 leaves such a group unlimited, and so does a host
	// without the pids controller.
	DefaultPids int64
	// Delegated is a v2 subtree brim owns that contains Parent, such as
	// the agent's systemd unit with Delegate=yes
	// ("/system.slice/brim-agent.service", see EnterLeafV2): the parent's
	// setup enables the controllers in every node from Delegated down to
	// Parent. Empty: only in Parent itself. Ignored on v1.
	Delegated string
	// Policy is how containers are treated by class beyond their limits
	// (oom_score_adj, memory soft limit and protection, io weight); nil:
	// DefaultPolicy.
	Policy *Policy
	// IOPaths are filesystem paths whose disks the IO throttle
	// (ThrottleIO) applies to, e.g. the agent's state dir, which holds the
	// sandboxes. A path on no block device (tmpfs, overlay) is an error.
	// None: ThrottleIO fails with isolator.ErrNotSupported.
	IOPaths []string
}

// DefaultPidsMax is the agent's default pids.max per container.
const DefaultPidsMax = 4096

// Isolator is the cgroup isolator (isolator.Isolator). Its methods are safe
// for concurrent use; calls for one container are serialised.
type Isolator struct {
	root, parent string
	defaultPids  int64
	delegated    string // v2 subtree brim owns above parent ("" for none)
	version      Version
	unified      string // hybrid host: the v2 mount ("" otherwise)
	policy       Policy
	ioDevices    []string // whole disks for the io throttle ("MAJ:MIN")

	lowMu     sync.Mutex
	lows      map[string]int64 // v2 memory.low of each group brim set
	parentLow int64            // last written to the parent (-1: unknown)

	setupMu sync.Mutex
	ready   bool

	// hier is the v1 hierarchies' directories, listed once: every
	// container's teardown walks them, and the host's cgroup mounts do
	// not change under a running agent.
	hier sync.Once
	dirs []string

	warmMu    sync.Mutex
	warmUsers int           // launches that asked Warm and are not done
	warmStop  chan struct{} // closes the running primer (nil: none)
	warmRenew chan struct{} // restarts the running primer's warmMax

	mu     sync.Mutex
	feat   Features
	groups map[string]*group
	// aliases maps a container claimed from a warm sandbox on cgroup v2
	// to the sandbox's group name, which it runs in (Path).
	aliases sync.Map

	bufs sync.Pool // *[]byte for reading stat files
}

// group is brim's record of one container group.
type group struct {
	mu   sync.Mutex
	spec *Spec // nil: unknown (found on disk, or a write failed half way)

	// files keeps the group's stat files open for Usage (nil until the
	// first Usage); Cleanup closes them.
	files  *fdSource
	layout statLayout
	gone   bool // removed by Cleanup: the record is stale
}

var (
	_ isolator.Isolator = (*Isolator)(nil)
	_ isolator.Verifier = (*Isolator)(nil)
	_ isolator.Warmer   = (*Isolator)(nil)
)

// New returns an isolator for cfg. It detects the layout under Root: v2 when
// Root is a cgroup2 mount (has cgroup.controllers), v1 otherwise (a hybrid
// host uses v1, and Root/unified for PSI). It creates nothing: the parent is
// made on the first Prepare or Recover. Errors wrap ErrInvalid for a bad
// config and isolator.ErrNotSupported for a host without cgroups.
func New(cfg Config) (*Isolator, error) {
	if cfg.Parent == "" {
		cfg.Parent = DefaultParent
	}
	if cfg.Root == "" {
		cfg.Root = DefaultRoot
	}
	if !path.IsAbs(cfg.Parent) || path.Clean(cfg.Parent) != cfg.Parent || cfg.Parent == "/" {
		return nil, fmt.Errorf("cgroup parent %q must be absolute, clean and not /: %w", cfg.Parent, ErrInvalid)
	}
	if d := cfg.Delegated; d != "" && (!path.IsAbs(d) || path.Clean(d) != d || d == "/" || !strings.HasPrefix(cfg.Parent, d+"/")) {
		return nil, fmt.Errorf("delegated cgroup %q must be absolute, clean, not / and contain the parent %q: %w", d, cfg.Parent, ErrInvalid)
	}
	if _, err := os.Stat(cfg.Root); err != nil {
		return nil, fmt.Errorf("cgroup root: %w: %w", isolator.ErrNotSupported, err)
	}
	if cfg.DefaultPids < 0 {
		return nil, fmt.Errorf("default pids limit %d: %w", cfg.DefaultPids, ErrInvalid)
	}
	pol := DefaultPolicy()
	if cfg.Policy != nil {
		pol = *cfg.Policy
	}
	if err := pol.Validate(); err != nil {
		return nil, err
	}
	devs, err := diskDevices(sysRoot, cfg.IOPaths)
	if err != nil {
		return nil, err
	}
	i := &Isolator{root: cfg.Root, parent: cfg.Parent, delegated: cfg.Delegated, version: V1, groups: make(map[string]*group),
		defaultPids: cfg.DefaultPids, policy: pol, ioDevices: devs, lows: make(map[string]int64), parentLow: -1}
	if exists(filepath.Join(cfg.Root, "cgroup.controllers")) {
		i.version = V2
	} else if u := filepath.Join(cfg.Root, "unified"); exists(filepath.Join(u, "cgroup.controllers")) {
		i.unified = u
	}
	if i.version == V1 && !exists(filepath.Join(cfg.Root, "cpu")) && !exists(filepath.Join(cfg.Root, "memory")) {
		return nil, fmt.Errorf("no cgroup hierarchies under %s: %w", cfg.Root, isolator.ErrNotSupported)
	}
	i.feat = i.detect()
	return i, nil
}

// Name implements isolator.Isolator.
func (i *Isolator) Name() string { return "cgroups" }

// Version returns the layout in use.
func (i *Isolator) Version() Version { return i.version }

// Features returns what the container groups get on this host.
func (i *Isolator) Features() Features {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.feat
}

// Path returns the cgroup path of container id ("/brim/<id>"), relative to
// each hierarchy's root: what Launch.CgroupPath gets. On cgroup v2 a
// container claimed from a warm sandbox runs in the sandbox's group
// ("/brim/warm-<hex>": v2 cannot rename a group, see Claim), and Path
// names that.
func (i *Isolator) Path(id string) string {
	if name, ok := i.aliases.Load(id); ok {
		return path.Join(i.parent, name.(string))
	}
	return path.Join(i.parent, id)
}

// Adopt records, after an agent restart, that container id runs in the
// group at cgroup path p (its launch's Launch.CgroupPath): a container
// claimed from a warm sandbox on cgroup v2 keeps the sandbox's group.
// Call it before Recover, which then knows the group as id's. Errors
// wrap ErrInvalid (p is not a group of the parent).
func (i *Isolator) Adopt(id, p string) error {
	name := path.Base(p)
	if err := validID(id); err != nil {
		return fmt.Errorf("adopt %s: %w", id, err)
	}
	if path.Dir(p) != i.parent || validID(name) != nil {
		return fmt.Errorf("adopt %s: cgroup path %q is not a group of the parent %q: %w", id, p, i.parent, ErrInvalid)
	}
	if name == id {
		i.aliases.Delete(id)
	} else {
		i.aliases.Store(id, name)
	}
	return nil
}

func (i *Isolator) detect() Features {
	if i.version == V2 {
		p := filepath.Join(i.root, i.parent)
		ctrls, err := os.ReadFile(filepath.Join(p, "cgroup.subtree_control"))
		if err != nil || len(strings.TrimSpace(string(ctrls))) == 0 {
			ctrls, _ = os.ReadFile(filepath.Join(p, "cgroup.controllers"))
		}
		if !exists(p) {
			// Not made yet (setup makes it, then detects again): it will
			// get what its parent enables for its children, and setup
			// enables all of that. cpu.idle and memory.swap.max are only
			// known once it exists (the root has neither file).
			ctrls, _ = os.ReadFile(filepath.Join(filepath.Dir(p), "cgroup.subtree_control"))
		}
		set := strings.Fields(string(ctrls))
		f := Features{
			CPU:        slices.Contains(set, "cpu"),
			Memory:     slices.Contains(set, "memory"),
			Pids:       slices.Contains(set, "pids"),
			CPUIdle:    exists(filepath.Join(p, "cpu.idle")),
			MemSwap:    exists(filepath.Join(p, "memory.swap.max")),
			IOThrottle: slices.Contains(set, "io"),
		}
		// memory.high and memory.low exist in every non-root group with
		// the memory controller.
		f.MemSoft = f.Memory
		if f.IOThrottle {
			f.IOWeightFile = firstExisting(p, "io.weight", "io.bfq.weight")
			f.IODevices = i.ioDevices
		}
		return f
	}
	blkio := filepath.Join(i.root, "blkio")
	f := Features{
		CPU:        exists(filepath.Join(i.root, "cpu")),
		Memory:     exists(filepath.Join(i.root, "memory")),
		Pids:       exists(filepath.Join(i.root, "pids")),
		CPUIdle:    exists(filepath.Join(i.root, "cpu", "cpu.idle")),
		MemSwap:    exists(filepath.Join(i.root, "memory", "memory.memsw.limit_in_bytes")),
		MemSoft:    exists(filepath.Join(i.root, "memory", "memory.soft_limit_in_bytes")),
		IOThrottle: exists(filepath.Join(blkio, "blkio.throttle.write_bps_device")),
	}
	if exists(blkio) {
		f.IOWeightFile = firstExisting(blkio, "blkio.weight", "blkio.bfq.weight")
	}
	if f.IOThrottle {
		f.IODevices = i.ioDevices
	}
	return f
}

// firstExisting returns the first of names that exists in dir, or "".
func firstExisting(dir string, names ...string) string {
	for _, n := range names {
		if exists(filepath.Join(dir, n)) {
			return n
		}
	}
	return ""
}

// dir returns the directory of cgroup path p (relative to the hierarchy
// roots) in controller ctrl's hierarchy (ignored on v2).
func (i *Isolator) dir(ctrl, p string) string {
	if i.version == V2 {
		return filepath.Join(i.root, p)
	}
	return filepath.Join(i.root, ctrl, p)
}

// hierarchies returns every hierarchy root a container group may live in:
// on v1 each mounted hierarchy (also name=systemd and the unified tree,
// which the shim joins too), on v2 the root.
func (i *Isolator) hierarchies() []string {
	if i.version == V2 {
		return []string{i.root}
	}
	i.hier.Do(func() { i.dirs = listHierarchies(i.root) })
	return i.dirs
}

// listHierarchies lists the v1 hierarchies under root, one directory per
// mount (cpu and cpuacct may be one: their symlinks count once).
func listHierarchies(root string) []string {
	ents, _ := os.ReadDir(root)
	seen := make(map[string]bool)
	var out []string
	for _, e := range ents {
		d := filepath.Join(root, e.Name())
		real, err := filepath.EvalSymlinks(d)
		if err != nil || seen[real] {
			continue // cpu and cpuacct may be one mount (cpu,cpuacct symlinks)
		}
		if st, err := os.Stat(real); err != nil || !st.IsDir() {
			continue
		}
		seen[real] = true
		out = append(out, d)
	}
	return out
}

// setup makes the parent (once it has succeeded): on v1 in every controller
// brim uses, with cpuset.cpus/mems copied down so that groups can be joined;
// on v2 with the controllers enabled for its children.
func (i *Isolator) setup() error {
	i.setupMu.Lock()
	defer i.setupMu.Unlock()
	if i.ready {
		return nil
	}
	if i.version == V2 {
		if err := i.setupV2(); err != nil {
			return err
		}
	} else {
		for _, c := range v1Create {
			if !exists(filepath.Join(i.root, c)) {
				continue
			}
			if err := os.MkdirAll(i.dir(c, i.parent), 0o755); err != nil {
				return fmt.Errorf("create cgroup parent: %w", err)
			}
			if c == "cpuset" {
				if err := i.cpusetDown(i.parent); err != nil {
					return err
				}
			}
		}
	}
	f := i.detect()
	i.mu.Lock()
	i.feat = f
	i.mu.Unlock()
	i.ready = true
	return nil
}

func (i *Isolator) setupV2() error {
	if err := os.MkdirAll(filepath.Join(i.root, i.parent), 0o755); err != nil {
		return fmt.Errorf("create cgroup parent: %w", err)
	}
	// Where brim owns the subtree above its parent, each node down to the
	// parent passes the controllers on; nowhere else.
	nodes := []string{i.parent}
	for d := path.Dir(i.parent); i.delegated != "" && strings.HasPrefix(d+"/", i.delegated+"/"); d = path.Dir(d) {
		nodes = append(nodes, d)
	}
	for k := len(nodes) - 1; k >= 0; k-- {
		if err := enableV2(filepath.Join(i.root, nodes[k])); err != nil {
			return err
		}
	}
	return nil
}

// enableV2 enables in cgroup directory p's subtree_control the controllers
// of v2Enable that p has and has not enabled yet.
func enableV2(p string) error {
	avail, err := os.ReadFile(filepath.Join(p, "cgroup.controllers"))
	if err != nil {
		return fmt.Errorf("read parent controllers: %w", err)
	}
	on, err := os.ReadFile(filepath.Join(p, "cgroup.subtree_control"))
	if err != nil {
		return fmt.Errorf("read parent subtree_control: %w", err)
	}
	var enable []string
	for _, c := range v2Enable {
		if slices.Contains(strings.Fields(string(avail)), c) && !slices.Contains(strings.Fields(string(on)), c) {
			enable = append(enable, "+"+c)
		}
	}
	if len(enable) > 0 {
		if err := writeFile(filepath.Join(p, "cgroup.subtree_control"), strings.Join(enable, " ")); err != nil {
			// EBUSY: p holds processes (the no-internal-processes rule).
			return fmt.Errorf("enable controllers %v in %s: %w", enable, p, err)
		}
	}
	return nil
}

// cpusetDown fills empty cpuset.cpus/mems of every level of cgroup path p
// from its parent (a v1 cpuset group with empty ones refuses processes).
func (i *Isolator) cpusetDown(p string) error {
	if p == "/" {
		return nil
	}
	if err := i.cpusetDown(path.Dir(p)); err != nil {
		return err
	}
	d, up := i.dir("cpuset", p), i.dir("cpuset", path.Dir(p))
	for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
		cur, err := os.ReadFile(filepath.Join(d, f))
		if err != nil {
			return fmt.Errorf("read %s: %w", f, err)
		}
		if len(strings.TrimSpace(string(cur))) > 0 {
			continue
		}
		v, err := os.ReadFile(filepath.Join(up, f))
		if err != nil {
			return fmt.Errorf("read %s: %w", f, err)
		}
		if err := writeFile(filepath.Join(d, f), strings.TrimSpace(string(v))); err != nil {
			return fmt.Errorf("copy %s into %s: %w", f, p, err)
		}
	}
	return nil
}

func validID(id string) error {
	if id == "" || id == "." || id == ".." || strings.ContainsAny(id, "/\x00") || len(id) > 200 {
		return fmt.Errorf("container id %q: %w", id, ErrInvalid)
	}
	return nil
}

// Prepare creates the group of container id with limits applied (in every
// v1 controller brim uses, so that the runtime can join it with empty
// resources) and sets launch.CgroupPath. An existing group is reused and
// its limits rewritten. Errors wrap ErrInvalid, isolator.ErrNotSupported,
// or the write's error.
func (i *Isolator) Prepare(ctx context.Context, id string, limits isolator.Limits, launch *isolator.Launch) error {
	spec := Spec{Limits: limits}
	if err := i.validate(id, spec); err != nil {
		return fmt.Errorf("prepare %s: %w", id, err)
	}
	if err := i.setup(); err != nil {
		return fmt.Errorf("prepare %s: %w", id, err)
	}
	if err := i.Features().check(spec); err != nil {
		return fmt.Errorf("prepare %s: %w", id, err)
	}
	spec = i.withDefaults(spec)
	if err := spec.validate(); err != nil {
		return fmt.Errorf("prepare %s: %w", id, err)
	}
	g := i.group(id, true)
	g.mu.Lock()
	defer g.mu.Unlock()
	p := i.Path(id)
	if i.version == V2 {
		if err := mkdir(i.dir("", p)); err != nil {
			return fmt.Errorf("prepare %s: %w", id, err)
		}
	} else {
		for _, c := range v1Create {
			if !exists(filepath.Join(i.root, c)) {
				continue
			}
			if err := mkdir(i.dir(c, p)); err != nil {
				return fmt.Errorf("prepare %s: %w", id, err)
			}
			if c == "cpuset" {
				if err := i.cpusetDown(p); err != nil {
					return fmt.Errorf("prepare %s: %w", id, err)
				}
			}
		}
	}
	g.spec = nil
	if err := i.apply(id, Plan(i.version, i.Features(), spec, nil)); err != nil {
		return fmt.Errorf("prepare %s: %w", id, err)
	}
	g.spec = &spec
	if err := i.setLow(id, spec.MemoryLow); err != nil {
		return fmt.Errorf("prepare %s: %w", id, err)
	}
	if launch != nil {
		launch.CgroupPath = p
		adj := spec.OOMScoreAdj
		launch.OOMScoreAdj = &adj
	}
	return nil
}

func (i *Isolator) validate(id string, s Spec) error {
	if err := validID(id); err != nil {
		return err
	}
	return s.validate()
}

// group returns brim's record of id. Without create, an unknown id whose
// group exists on disk gets a record with an unknown spec; nil means no
// such group.
func (i *Isolator) group(id string, create bool) *group {
	i.mu.Lock()
	defer i.mu.Unlock()
	if g, ok := i.groups[id]; ok {
		return g
	}
	if !create && !exists(i.dir(i.mainController(), i.Path(id))) {
		return nil
	}
	g := &group{}
	i.groups[id] = g
	return g
}

// mainController is a v1 controller every group is in (ignored on v2).
func (i *Isolator) mainController() string {
	for _, c := range []string{"memory", "cpu", "pids", "freezer"} {
		if exists(filepath.Join(i.root, c)) {
			return c
		}
	}
	return "cpu"
}

// apply performs writes on the group of id.
func (i *Isolator) apply(id string, writes []Write) error {
	p := i.Path(id)
	for _, w := range writes {
		err := writeFile(filepath.Join(i.dir(w.Controller, p), w.File), w.Value)
		if err == nil {
			continue
		}
		if errors.Is(err, syscall.EBUSY) && strings.HasPrefix(w.File, "memory.") {
			return fmt.Errorf("set %s: %w: %w", w, ErrMemoryInUse, err)
		}
		if errors.Is(err, fs.ErrNotExist) && !exists(i.dir(w.Controller, p)) {
			return fmt.Errorf("set %s: %w", w, isolator.ErrNotFound)
		}
		return fmt.Errorf("set %s: %w", w, err)
	}
	return nil
}

// VerifiesOnly implements isolator.Verifier: Isolate only checks that the
// init is in the group the runtime joined from Launch.CgroupPath.
func (i *Isolator) VerifiesOnly() bool { return true }

// Isolate checks that pid (the container's init) is in the group: the
// launcher put it there. Errors wrap ErrNotMember or isolator.ErrNotFound.
func (i *Isolator) Isolate(ctx context.Context, id string, pid int) error {
	pids, err := i.PIDs(ctx, id)
	if err != nil {
		return fmt.Errorf("isolate %s: %w", id, err)
	}
	if !slices.Contains(pids, pid) {
		return fmt.Errorf("isolate %s: pid %d: %w", id, pid, ErrNotMember)
	}
	return nil
}

// Update changes the limits of a running container with the fewest writes,
// in an order the kernel accepts (see Plan). A memory limit the kernel
// cannot reclaim down to fails with ErrMemoryInUse and leaves the other
// limits as they were before Update or already applied (not atomic); the
// next Update then rewrites every file. On v2 the kernel reclaims and, if
// that is not enough, OOM-kills inside the group instead of refusing.
// Errors also wrap ErrInvalid, isolator.ErrNotFound and
// isolator.ErrNotSupported.
func (i *Isolator) Update(ctx context.Context, id string, limits isolator.Limits) error {
	if err := i.validate(id, Spec{Limits: limits}); err != nil {
		return fmt.Errorf("update %s: %w", id, err)
	}
	g := i.group(id, false)
	if g == nil {
		return fmt.Errorf("update %s: %w", id, isolator.ErrNotFound)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	want := Spec{Limits: limits}
	if g.spec != nil {
		want.ThrottleMilliCPUs = g.spec.ThrottleMilliCPUs
		want.IOThrottle = g.spec.IOThrottle
		want.QoSIOLimit = g.spec.QoSIOLimit
	}
	if err := i.set(id, g, want); err != nil {
		return fmt.Errorf("update %s: %w", id, err)
	}
	return nil
}

// withDefaults gives s the default pids limit when it asks for none and
// the host has the controller, and what the policy derives from its class.
func (i *Isolator) withDefaults(s Spec) Spec {
	if s.Limits.Pids == 0 && i.defaultPids > 0 && i.Features().Pids {
		s.Limits.Pids = i.defaultPids
	}
	return i.policy.derive(s, i.Features().IOWeightFile)
}

// set applies want to g (locked by the caller), then the oom_score_adj of
// the group's processes when it changes or is unknown.
func (i *Isolator) set(id string, g *group, want Spec) error {
	f := i.Features()
	if err := f.check(want); err != nil {
		return err
	}
	want = i.withDefaults(want)
	if err := want.validate(); err != nil {
		return err
	}
	have := g.spec
	writes := Plan(i.version, f, want, have)
	if err := i.apply(id, writes); err != nil {
		if len(writes) > 1 {
			g.spec = nil // partly applied: rewrite everything next time
		}
		return err
	}
	if have == nil || have.OOMScoreAdj != want.OOMScoreAdj {
		if err := i.setOOMScoreAdj(id, want.OOMScoreAdj); err != nil {
			g.spec = nil
			return err
		}
	}
	g.spec = &want
	return i.setLow(id, want.MemoryLow)
}

// ThrottleIO is the io guard's throttle (pressure.IOThrottler): it caps
// the container's IO on the disks of Config.IOPaths (v1
// blkio.throttle.*_device, v2 io.max) until called with a zero IOLimit.
// The QoS controller's own limit (SetIOLimit) is kept apart: the group
// gets the tighter of the two (Spec.IOCap), and lifting one leaves the
// other in force. Later Updates keep both; Recover lifts them
// (corrections do not survive an agent restart). On v1 the kernel
// throttles only IO the group issues itself (direct and synchronous IO):
// page-cache writeback is not charged to the writer's group there. Errors
// wrap isolator.ErrNotFound, ErrInvalid and isolator.ErrNotSupported (no
// throttling controller, or no disk configured).
func (i *Isolator) ThrottleIO(ctx context.Context, id string, l IOLimit) error {
	if err := i.correct(id, func(s *Spec) { s.IOThrottle = l }); err != nil {
		return fmt.Errorf("throttle io of %s: %w", id, err)
	}
	return nil
}

// SetIOLimit is the QoS controller's IO correction (qos.IOActuator): it
// caps reads and writes of container id at bytesPerSec each; 0 lifts the
// cap. The io guard's throttle (ThrottleIO) stays in force beside it.
func (i *Isolator) SetIOLimit(ctx context.Context, id string, bytesPerSec int64) error {
	if bytesPerSec < 0 {
		return fmt.Errorf("limit io of %s to %d bytes/s: %w", id, bytesPerSec, ErrInvalid)
	}
	if err := i.correct(id, func(s *Spec) { s.QoSIOLimit = IOLimit{ReadBPS: bytesPerSec, WriteBPS: bytesPerSec} }); err != nil {
		return fmt.Errorf("limit io of %s: %w", id, err)
	}
	return nil
}

// correct applies one QoS correction (mod: a cpu throttle, an io cap) to
// group id's spec, keeping everything else.
func (i *Isolator) correct(id string, mod func(*Spec)) error {
	if err := validID(id); err != nil {
		return err
	}
	g := i.group(id, false)
	if g == nil {
		return isolator.ErrNotFound
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.spec == nil {
		return fmt.Errorf("limits unknown: %w", isolator.ErrNotFound)
	}
	want := *g.spec
	mod(&want)
	return i.set(id, g, want) // validates
}

// Spec returns what brim last wrote for container id (limits, the class's
// soft limits, io weight and oom_score_adj, corrections in force); ok is
// false for an unknown group or one whose state is unknown.
func (i *Isolator) Spec(id string) (s Spec, ok bool) {
	i.mu.Lock()
	g := i.groups[id]
	i.mu.Unlock()
	if g == nil {
		return Spec{}, false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.spec == nil {
		return Spec{}, false
	}
	return *g.spec, true
}

// SetCPUQuota is the QoS controller's throttle: it caps the container's
// CFS quota at milliCPUs (below a quota its limits ask for, if any) until
// called with 0, which restores the quota the limits ask for (none without
// CPUQuota). Later Updates keep the throttle. Errors wrap
// isolator.ErrNotFound (also for a group whose limits brim does not know:
// call Recover first), ErrInvalid and isolator.ErrNotSupported.
func (i *Isolator) SetCPUQuota(ctx context.Context, id string, milliCPUs int64) error {
	if milliCPUs < 0 {
		return fmt.Errorf("set cpu quota of %s: %d millicpus: %w", id, milliCPUs, ErrInvalid)
	}
	if err := i.correct(id, func(s *Spec) { s.ThrottleMilliCPUs = milliCPUs }); err != nil {
		return fmt.Errorf("set cpu quota of %s: %w", id, err)
	}
	return nil
}

// Usage adds cpu, memory, pids and (where the container has a v2
// directory) PSI statistics to stats. Errors wrap isolator.ErrNotFound.
func (i *Isolator) Usage(ctx context.Context, id string, stats *isolator.Statistics) error {
	if err := validID(id); err != nil {
		return fmt.Errorf("usage of %s: %w", id, err)
	}
	g := i.group(id, false)
	if g == nil {
		return fmt.Errorf("usage of %s: %w", id, isolator.ErrNotFound)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.gone {
		return fmt.Errorf("usage of %s: %w", id, isolator.ErrNotFound)
	}
	if g.files == nil {
		paths, l := i.statPaths(i.Path(id))
		g.files, g.layout = newFDSource(paths, l.v2), l
	}
	bufp, _ := i.bufs.Get().(*[]byte)
	if bufp == nil {
		b := make([]byte, 8<<10)
		bufp = &b
	}
	g.files.buf = bufp
	orig := *stats
	var lim *specLimits // nil: read the limit files
	if g.spec != nil {
		l := limitsOf(g.spec)
		lim = &l
	}
	err := fillStats(g.files, g.layout, lim, stats)
	if errors.Is(err, syscall.ENODEV) {
		// The group was removed, and maybe made again, under the open
		// descriptors: reopen.
		g.files.close()
		*stats = orig
		err = fillStats(g.files, g.layout, lim, stats)
	}
	g.files.buf = nil
	i.bufs.Put(bufp)
	if err != nil {
		g.files.close() // do not hold a removed group's files
	}
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENODEV) {
		return fmt.Errorf("usage of %s: %w: %w", id, isolator.ErrNotFound, err)
	}
	if err != nil {
		return fmt.Errorf("usage of %s: %w", id, err)
	}
	if g.spec != nil {
		stats.CPULimit = float64(g.spec.Limits.MilliCPUs) / 1000
		if q := quotaMicros(*g.spec); q > 0 {
			stats.CPULimit = float64(q) / CFSPeriodMicros
		}
	}
	if stats.Timestamp.IsZero() {
		stats.Timestamp = time.Now()
	}
	return nil
}

// PIDs returns the processes in the container's group and its descendants.
// Errors wrap isolator.ErrNotFound.
func (i *Isolator) PIDs(ctx context.Context, id string) ([]int, error) {
	if err := validID(id); err != nil {
		return nil, fmt.Errorf("list pids of %s: %w", id, err)
	}
	pids, err := readProcs(i.dir(i.pidsController(), i.Path(id)))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("list pids of %s: %w", id, isolator.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("list pids of %s: %w", id, err)
	}
	return pids, nil
}

func (i *Isolator) pidsController() string {
	if i.version == V1 && exists(filepath.Join(i.root, "pids")) {
		return "pids"
	}
	return i.mainController()
}

// readProcs lists cgroup.procs of dir and every group below it.
func readProcs(dir string) ([]int, error) {
	if _, err := os.Stat(dir); err != nil {
		return nil, err
	}
	var pids []int
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && p != dir {
				return nil // a nested group went away
			}
			return err
		}
		if !e.IsDir() {
			return nil
		}
		f, err := openProcs(filepath.Join(p, "cgroup.procs"))
		if groupGone(err) && p != dir {
			return nil
		}
		if err != nil {
			return err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		var found []int
		for sc.Scan() {
			if n, err := strconv.Atoi(strings.TrimSpace(sc.Text())); err == nil {
				found = append(found, n)
			}
		}
		if err := sc.Err(); err != nil {
			if groupGone(err) && p != dir {
				return nil // removed between the open and the read
			}
			return err
		}
		pids = append(pids, found...)
		return nil
	})
	return pids, err
}

// openProcs opens a cgroup.procs file (a variable: tests remove the group
// between the open and the read).
var openProcs = os.Open

// groupGone reports an error of a group removed meanwhile: its directory
// gone (ENOENT), or a file of it read after its rmdir (ENODEV).
func groupGone(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENODEV)
}

// Cleanup removes the container's group from every hierarchy (and its
// nested groups; on a hybrid host also the unified directory). It kills
// nothing: a group that still has processes fails with ErrBusy and is
// left in place. Idempotent.
func (i *Isolator) Cleanup(ctx context.Context, id string) error {
	if err := validID(id); err != nil {
		return fmt.Errorf("cleanup %s: %w", id, err)
	}
	i.mu.Lock()
	g := i.groups[id]
	i.mu.Unlock()
	if g != nil {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.files != nil {
			g.files.close()
		}
	}
	if err := i.remove(ctx, i.Path(id)); err != nil {
		return fmt.Errorf("cleanup %s: %w", id, err)
	}
	i.aliases.Delete(id)
	if g != nil {
		g.gone = true
	}
	i.mu.Lock()
	if i.groups[id] == g {
		delete(i.groups, id)
	}
	i.mu.Unlock()
	if err := i.setLow(id, 0); err != nil {
		return fmt.Errorf("cleanup %s: %w", id, err)
	}
	return nil
}

// remove deletes cgroup path p (a child of the parent) from every
// hierarchy, deepest groups first, after checking none has processes.
func (i *Isolator) remove(ctx context.Context, p string) error {
	var dirs []string
	for _, h := range i.hierarchies() {
		d := filepath.Join(h, p)
		_ = filepath.WalkDir(d, func(q string, e fs.DirEntry, err error) error {
			if err == nil && e.IsDir() {
				dirs = append(dirs, q)
			}
			return nil
		})
	}
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		if err == nil && len(strings.TrimSpace(string(b))) > 0 {
			return fmt.Errorf("%s: pids %s: %w", d, strings.Join(strings.Fields(string(b)), ","), ErrBusy)
		}
	}
	for j := len(dirs) - 1; j >= 0; j-- {
		if err := rmdir(ctx, dirs[j]); err != nil {
			return err
		}
	}
	return nil
}

// rmdir removes a cgroup directory, retrying while the kernel still holds
// it busy for a process that has just exited.
func rmdir(ctx context.Context, d string) error {
	delay := time.Millisecond
	for {
		err := os.Remove(d)
		if err == nil || errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if !errors.Is(err, syscall.EBUSY) || delay > 256*time.Millisecond {
			if errors.Is(err, syscall.EBUSY) {
				return fmt.Errorf("remove %s: %w: %w", d, ErrBusy, err)
			}
			return fmt.Errorf("remove %s: %w", d, err)
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("remove %s: %w", d, ctx.Err())
		case <-t.C:
		}
		delay *= 2
	}
}

// Recover is called after an agent restart: it makes the parent if missing,
// reapplies the limits of the known containers whose groups exist (in an
// order valid whatever the groups hold; a group only partly there, which a
// dead agent was making or removing, is left for Cleanup), and removes every other group
// under the parent, in every hierarchy (orphans); never anything outside
// the parent. It carries on past errors and returns them joined (an orphan
// with processes wraps ErrBusy).
func (i *Isolator) Recover(ctx context.Context, known map[string]isolator.Limits) error {
	if err := i.setup(); err != nil {
		return fmt.Errorf("recover: %w", err)
	}
	children := make(map[string]bool)
	for _, h := range i.hierarchies() {
		ents, err := os.ReadDir(filepath.Join(h, i.parent))
		if err != nil {
			continue
		}
		for _, e := range ents {
			if e.IsDir() {
				children[e.Name()] = true
			}
		}
	}
	var errs []error
	for id, limits := range known {
		spec := Spec{Limits: limits}
		if err := i.validate(id, spec); err != nil {
			errs = append(errs, fmt.Errorf("recover %s: %w", id, err))
			continue
		}
		if !children[path.Base(i.Path(id))] {
			continue // no group: Update reports ErrNotFound
		}
		g := i.group(id, true)
		g.mu.Lock()
		g.spec = nil
		// A group missing in some hierarchy (ErrNotFound) is one a dead
		// agent was making or removing: nothing of the container runs
		// in it (a process is in a group of every hierarchy), and
		// Cleanup removes what is there. Not an error of the recovery.
		if err := i.set(id, g, spec); err != nil && !errors.Is(err, isolator.ErrNotFound) {
			errs = append(errs, fmt.Errorf("recover %s: %w", id, err))
		}
		g.mu.Unlock()
	}
	inUse := make(map[string]bool, len(known)) // group names of the known containers (Adopt)
	for id := range known {
		inUse[path.Base(i.Path(id))] = true
	}
	for id := range children {
		if inUse[id] || validID(id) != nil {
			continue
		}
		if err := i.Cleanup(ctx, id); err != nil {
			errs = append(errs, fmt.Errorf("recover: remove orphan: %w", err))
		}
	}
	return errors.Join(errs...)
}

// Freeze stops every process of the container (v1 freezer, v2
// cgroup.freeze) and waits until the kernel reports the group frozen or ctx
// ends. Errors wrap isolator.ErrNotFound and isolator.ErrNotSupported.
func (i *Isolator) Freeze(ctx context.Context, id string) error {
	if err := i.freeze(ctx, id, true); err != nil {
		return fmt.Errorf("freeze %s: %w", id, err)
	}
	return nil
}

// Thaw resumes a frozen container. Errors as Freeze.
func (i *Isolator) Thaw(ctx context.Context, id string) error {
	if err := i.freeze(ctx, id, false); err != nil {
		return fmt.Errorf("thaw %s: %w", id, err)
	}
	return nil
}

func (i *Isolator) freeze(ctx context.Context, id string, frozen bool) error {
	if err := validID(id); err != nil {
		return err
	}
	var file, value, stateFile string
	var done func([]byte) bool
	d := i.dir("freezer", i.Path(id))
	if i.version == V2 {
		file, value, stateFile = "cgroup.freeze", "0", "cgroup.events"
		if frozen {
			value = "1"
		}
		want := "frozen " + value
		done = func(b []byte) bool {
			return slices.Contains(strings.Split(string(b), "\n"), want)
		}
	} else {
		if !exists(filepath.Join(i.root, "freezer")) {
			return fmt.Errorf("freezer controller: %w", isolator.ErrNotSupported)
		}
		file, value, stateFile = "freezer.state", "THAWED", "freezer.state"
		if frozen {
			value = "FROZEN"
		}
		done = func(b []byte) bool { return strings.TrimSpace(string(b)) == value }
	}
	if !exists(d) {
		return isolator.ErrNotFound
	}
	delay := 100 * time.Microsecond
	for try := 0; ; try++ {
		// v1 can stay FREEZING while a task is in an uninterruptible
		// sleep; rewriting the state retries the freeze (as runc does).
		if try%10 == 0 {
			if err := writeFile(filepath.Join(d, file), value); err != nil {
				return fmt.Errorf("write %s: %w", file, err)
			}
		}
		b, err := os.ReadFile(filepath.Join(d, stateFile))
		if err != nil {
			return fmt.Errorf("read %s: %w", stateFile, err)
		}
		if done(b) {
			return nil
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		if delay < 10*time.Millisecond {
			delay *= 2
		}
	}
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func mkdir(d string) error {
	if err := os.Mkdir(d, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("create cgroup: %w", err)
	}
	return nil
}

// writeFile writes value to an existing cgroup file (never creates one).
func writeFile(p, value string) error {
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(value)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
