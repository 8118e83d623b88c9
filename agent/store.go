package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/brimnode/brim/internal/atomicfile"
	"github.com/brimnode/brim/isolator"
)

// Container states.
const (
	StateLaunching = "launching" // checkpointed, launch in progress
	StateRunning   = "running"
	StateExited    = "exited"
)

// Container is the agent's record of one container, checkpointed as JSON in
// the state dir. Values returned by the Agent are copies.
type Container struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Command   []string        `json:"command"`
	Env       []string        `json:"env,omitempty"`
	Cwd       string          `json:"cwd,omitempty"`
	Rootfs    string          `json:"rootfs,omitempty"`
	User      string          `json:"user,omitempty"`
	UserNS    bool            `json:"userns,omitempty"`
	Limits    isolator.Limits `json:"limits"`
	Revocable bool            `json:"revocable,omitempty"`
	// Lent: a revocable container on capacity the master lends
	// (Spec.Lent), accounted against the agent's own resources.
	Lent       bool              `json:"lent,omitempty"`
	Labels     map[string]string `json:"labels,omitempty"`
	State      string            `json:"state"`
	Pid        int               `json:"pid,omitempty"`
	CreatedAt  time.Time         `json:"createdAt"`
	StartedAt  time.Time         `json:"startedAt,omitzero"`
	Exit       *ExitStatus       `json:"exit,omitempty"`
	SandboxDir string            `json:"sandboxDir,omitempty"`
	// Quarantine says why the container's checkpoint record could not be
	// read (see Quarantined); such a container is never checkpointed.
	Quarantine string `json:"-"`
	Address    string `json:"address,omitempty"`
	// CgroupPath is the container's cgroup path (RuntimeInfo.CgroupPath;
	// "": <CgroupParent>/<ID>). See CgroupOf.
	CgroupPath string `json:"cgroupPath,omitempty"`
	// LogDir holds the container's output (internal/containerlog);
	// without one (a container of an older agent) it is in SandboxDir's
	// stdout and stderr files. LogMaxSize and LogMaxFiles are its bound
	// (0: unbounded, a container of an older agent).
	LogDir      string `json:"logDir,omitempty"`
	LogMaxSize  int64  `json:"logMaxSize,omitempty"`
	LogMaxFiles int    `json:"logMaxFiles,omitempty"`
	// Image is the reference the container was launched from (as
	// asked), ImageID and ImageDigest what it resolved to (the config's
	// and the manifest's digests); ExposedPorts the image's hint.
	Image        string   `json:"image,omitempty"`
	ImageID      string   `json:"imageId,omitempty"`
	ImageDigest  string   `json:"imageDigest,omitempty"`
	ExposedPorts []string `json:"exposedPorts,omitempty"`
	// ReadWrite: the image root is writable, up to Limits.DiskBytes.
	ReadWrite bool `json:"readWrite,omitempty"`
	// DiskMiB is the disk the container is accounted for (asked).
	DiskMiB int64 `json:"diskMiB,omitempty"`
	// Paused: a user paused the container (Agent.Pause); its cgroup is
	// frozen until Unpause or a kill.
	Paused bool `json:"paused,omitempty"`
	// Restarts counts the times Agent.Restart ran it again.
	Restarts int `json:"restarts,omitempty"`
	// Stdin and Tty: the container was run with a stdin to attach to, a
	// terminal.
	Stdin bool `json:"stdin,omitempty"`
	Tty   bool `json:"tty,omitempty"`
}

// Quarantined is a checkpoint record the agent could not read at recovery.
// The file is left as it was; see Agent.Recover.
type Quarantined struct {
	ID   string // from the file name
	File string // the record's path
	Err  string // why it could not be read
	// Container is what the runtime had under ID at recovery: "running",
	// "exited" or "none".
	Container string
}

// Resources returns what the container is accounted for.
func (c *Container) Resources() Resources {
	r := Resources{MilliCPUs: c.Limits.MilliCPUs, MemMiB: c.Limits.MemoryBytes >> 20, DiskMiB: c.DiskMiB}
	if !c.Revocable {
		r.NetMbit = c.Limits.NetBandwidthMbit // revocable bandwidth is borrowed, not accounted
	}
	return r
}

func (c *Container) clone() *Container {
	n := *c
	n.Command = append([]string(nil), c.Command...)
	n.Env = append([]string(nil), c.Env...)
	n.ExposedPorts = append([]string(nil), c.ExposedPorts...)
	if c.Labels != nil {
		n.Labels = make(map[string]string, len(c.Labels))
		for k, v := range c.Labels {
			n.Labels[k] = v
		}
	}
	if c.Exit != nil {
		e := *c.Exit
		n.Exit = &e
	}
	return &n
}

// checkpointVersion is the format of checkpoint records; an agent refuses
// records newer than it knows rather than misreading them.
const checkpointVersion = 1

type checkpointRecord struct {
	Version int `json:"version"`
	*Container
}

// store is the checkpoint: one JSON file per container under dir, written
// atomically (temp file, rename) so a crash leaves either the old or the
// new record, never a torn one. A record with the container's exit is
// fsynced (file and directory): it is how the container ended, which
// only the agent knows. A record of a container being launched or
// running is not: a crash of the machine ends the container anyway (the
// master learns that when the agent registers again), a crash of the
// agent alone (kill -9) leaves the file in the page cache, and two
// fsyncs under the agent's lock cost every launch milliseconds on a busy
// host (docs/benchmarks.md).
type store struct {
	dir   string
	files *atomicfile.Dir
}

// storeSpares is how many emptied record files the checkpoint directory
// keeps for new records (atomicfile.Dir): about a launch's worth per
// container the agent holds at once, so that a busy node's checkpoints
// make no file per write.
const storeSpares = 256

func newStore(dir string) (*store, error) {
	files, err := atomicfile.NewDir(dir, storeSpares)
	if err != nil {
		return nil, fmt.Errorf("create checkpoint dir: %w", err)
	}
	return &store{dir: dir, files: files}, nil
}

func (s *store) put(c *Container) error {
	b, err := json.MarshalIndent(checkpointRecord{Version: checkpointVersion, Container: c}, "", "  ")
	if err != nil {
		return fmt.Errorf("checkpoint %s: %w", c.ID, err)
	}
	if err := s.files.WriteFile(c.ID+".json", b, 0o600, durable(c)); err != nil {
		return fmt.Errorf("checkpoint %s: %w", c.ID, err)
	}
	return nil
}

// durable reports whether c's record must survive a crash of the
// machine: it carries how the container ended.
func durable(c *Container) bool { return c.Exit != nil }

// probe writes and removes a small temporary file in the checkpoint
// directory: nil when a record would fit.
func (s *store) probe() error {
	f, err := os.CreateTemp(s.dir, ".probe*")
	if err != nil {
		return fmt.Errorf("probe checkpoint dir: %w", err)
	}
	_, err = f.Write(make([]byte, 4096))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if rerr := os.Remove(f.Name()); err == nil {
		err = rerr
	}
	if err != nil {
		return fmt.Errorf("probe checkpoint dir: %w", err)
	}
	return nil
}

func (s *store) delete(id string) error {
	if err := s.files.Remove(id+".json", true); err != nil {
		return fmt.Errorf("remove checkpoint %s: %w", id, err)
	}
	return nil
}

// load reads every record; temp files left by a crash are removed. A
// record that cannot be read or parsed, is of a newer format or names
// another ID than its file is returned in bad, not as an error: one bad
// record must not stop the others' recovery. The error is for a checkpoint
// directory that cannot be read at all.
func (s *store) load() (recs []*Container, bad []Quarantined, err error) {
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, nil, fmt.Errorf("read checkpoint dir: %w", err)
	}
	for _, e := range ents {
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			_ = os.Remove(filepath.Join(s.dir, name)) // a temporary file an older agent's crash left
			continue
		}
		if !strings.HasSuffix(name, ".json") || e.IsDir() {
			continue
		}
		c, err := s.read(name)
		if err != nil {
			bad = append(bad, Quarantined{ID: strings.TrimSuffix(name, ".json"), File: filepath.Join(s.dir, name), Err: err.Error()})
			continue
		}
		recs = append(recs, c)
	}
	return recs, bad, nil
}

// read reads and checks one record.
func (s *store) read(name string) (*Container, error) {
	b, err := os.ReadFile(filepath.Join(s.dir, name))
	if err != nil {
		return nil, fmt.Errorf("read checkpoint %s: %w", name, err)
	}
	var c Container
	rec := checkpointRecord{Container: &c}
	if err := json.Unmarshal(b, &rec); err != nil {
		return nil, fmt.Errorf("parse checkpoint %s: %w", name, err)
	}
	if rec.Version > checkpointVersion {
		return nil, fmt.Errorf("parse checkpoint %s: format version %d is newer than this agent's (%d)", name, rec.Version, checkpointVersion)
	}
	if c.ID+".json" != name {
		return nil, fmt.Errorf("parse checkpoint %s: record has id %q", name, c.ID)
	}
	switch c.State {
	case StateLaunching, StateRunning, StateExited:
	default:
		return nil, fmt.Errorf("parse checkpoint %s: unknown state %q", name, c.State)
	}
	return &c, nil
}

// MakeStateDir creates the agent's state dir dir (mode 0700) and any
// missing parents (mode 0755, as mkdir -p under a umask of 022 would):
// the dir's own mode keeps its contents private, while its parents must
// stay traversable for the root of a container's user namespace (an
// unprivileged host uid, containerizer/userns_linux.go). An existing dir
// or parent keeps its mode.
func MakeStateDir(dir string) error {
	if err := os.MkdirAll(filepath.Dir(filepath.Clean(dir)), 0o755); err != nil {
		return fmt.Errorf("create state dir: %w", err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("create state dir: %w", err)
	}
	return nil
}
