package executor

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/brimnode/brim/internal/atomicfile"
	"github.com/brimnode/brim/internal/containerlog"
	"github.com/brimnode/brim/internal/errdefs"
	"github.com/brimnode/brim/internal/exitstatus"
	"github.com/brimnode/brim/internal/subid"
	"os"
	"path/filepath"
	"time"
)

// Sentinel errors; match them with errors.Is.
var (
	// ErrNotRunning is returned for an operation that needs a running
	// container (Signal) after the container has exited.
	ErrNotRunning = errors.New("container not running")
	// ErrShimGone is returned by Dial and the Client methods when no shim
	// answers on the control socket (the shim has exited or died).
	ErrShimGone = errors.New("shim not running")
	// ErrShimUnresponsive is returned by the Client methods when a shim
	// accepts no connection or does not answer within the call's deadline
	// (stopped, hung, or overwhelmed): the container may still run, but
	// nobody can manage it through this shim.
	ErrShimUnresponsive = errors.New("shim does not answer")
	// ErrCommandNotFound is returned when the command to run does not exist
	// (or is not executable) in the container's root filesystem.
	ErrCommandNotFound = errors.New("command not found, or not reachable and executable by the task's user, in the container's root filesystem")
	// ErrNotSupported is returned by the shim on hosts other than Linux
	// (internal/errdefs.ErrNotSupported, the one "not supported").
	ErrNotSupported = errdefs.ErrNotSupported
)

// Names of the files in a container directory. The containerizer creates
// the directory, the sandbox and BundleFile; the shim writes the rest.
const (
	// BundleFile is the JSON Bundle the shim runs.
	BundleFile = "bundle.json"
	// ExitFile is the ExitStatus the shim writes atomically once the
	// container has exited and been destroyed.
	ExitFile = "exit.json"
	// SocketFile is the shim's control socket.
	SocketFile = "shim.sock"
	// ShimLogFile receives the shim's own stdout and stderr.
	ShimLogFile = "shim.log"
	// SandboxDir is the sandbox directory, mounted at SandboxMountPoint.
	SandboxDir = "sandbox"
	// RootfsDir is the mount point the shim assembles the host root on
	// (only in its private mount namespace) when the bundle has no rootfs.
	RootfsDir = "rootfs"
	// SysfsDir is where the shim mounts, in its private mount namespace,
	// the sysfs of the network namespace a container in a user namespace
	// joins (see mountNetSysfs); the container's /sys is bound from it.
	SysfsDir = "sysfs"
	// LogDir holds the container's output: the shim copies its stdout
	// and stderr into rotated files there (internal/containerlog), out
	// of the task's reach (the container directory is root's).
	LogDir = "log"
	// CgroupViewDir is where, on a cgroup v1 host, the shim assembles in
	// its private mount namespace the container's /sys/fs/cgroup: binds
	// of the container's own groups (see mountCgroupView).
	CgroupViewDir = "cgroupfs"
	// StdoutFile and StderrFile were the container's output, in the
	// sandbox, before LogDir (containers of older agents still have them).
	StdoutFile = "stdout"
	StderrFile = "stderr"
	// SandboxMountPoint is where the sandbox appears inside the container.
	SandboxMountPoint = "/mnt/sandbox"
)

// Bundle is what the shim runs: written by the containerizer into
// <dir>/bundle.json before it starts `brim shim --id ID --bundle DIR`.
type Bundle struct {
	// Version of the bundle format; BundleVersion.
	Version int `json:"version"`
	// ID is the container ID (libcontainer's ID; [A-Za-z0-9_+.-]+).
	ID string `json:"id"`
	// Args is the user command; Args[0] is resolved with PATH from Env
	// inside the container.
	Args []string `json:"args"`
	Env  []string `json:"env,omitempty"`
	// Cwd inside the container; "/" when empty.
	Cwd string `json:"cwd,omitempty"`
	// Rootfs is a root filesystem directory on the host, mounted
	// read-only; empty means the host root, read-only (or Image's).
	Rootfs string `json:"rootfs,omitempty"`
	// Image, when set, is the root: an overlay of an image's layers under
	// the container's own upper dir, which the shim mounts in its
	// private mount namespace (Rootfs is then empty).
	Image *ImageRoot `json:"image,omitempty"`
	// Hostname inside the container (the UTS namespace); ID when empty.
	Hostname string `json:"hostname,omitempty"`
	// CgroupPath is the absolute cgroup path the isolators prepared
	// (e.g. "/brim/<id>"). Required: relative or empty paths are refused.
	CgroupPath string `json:"cgroup_path"`
	// NetNSPath is a network namespace to join; empty means a new one with
	// only loopback.
	NetNSPath string `json:"netns_path,omitempty"`
	// StateRoot is libcontainer's state directory (shared by containers).
	StateRoot string `json:"state_root"`
	// DataDir holds the container's sandbox (SandboxDir) and output
	// (LogDir) when they are not in the container directory: an agent
	// with a --run-dir keeps its containers' directories there (on tmpfs,
	// lost at a reboot with the containers) and only what a task writes
	// on the state dir's disk. Empty: the container directory.
	DataDir string `json:"data_dir,omitempty"`
	// HidePaths are host paths masked from a container on the host root:
	// a directory under an empty tmpfs (mode 0755, root), a file under an
	// empty file of mode 0000; symlinks are resolved inside the root.
	// The containerizer puts the agent's state dir, its socket's directory
	// and the operator's list (/etc/shadow, /root, /run, …) here.
	HidePaths []string `json:"hide_paths,omitempty"`
	// UID and GID run the user process (no supplementary groups); 0 is
	// root. The containerizer resolves them from the host's user database
	// and owns the sandbox to them.
	UID uint32 `json:"uid,omitempty"`
	GID uint32 `json:"gid,omitempty"`
	// UserNS runs the container in a new user namespace whose IDs
	// 0..Size-1 map onto the range's host IDs: UID and GID are then the
	// container's IDs (root included, unprivileged on the host), and the
	// containerizer owns the sandbox to their host IDs. nil: no user
	// namespace, UID and GID are host IDs.
	UserNS *subid.Range `json:"userns,omitempty"`
	// NoSeccomp disables the default seccomp profile.
	NoSeccomp bool `json:"no_seccomp,omitempty"`
	// OOMScoreAdj, when set, is the oom_score_adj of the container's init
	// (its processes inherit it), set before the user process runs; nil
	// inherits the shim's. The cgroup isolator chooses it by QoS class.
	OOMScoreAdj *int `json:"oom_score_adj,omitempty"`
	// SkipGoAhead lets a shim started with the launch handshake run the
	// user process as soon as the init is created and its confinement
	// verified (cgroup and network namespace), without waiting for the
	// go-ahead: the containerizer sets it when no isolator needs the init
	// before the user process runs (isolator.Verifier). The shim then
	// reports "running" only (with the pid), not "created".
	SkipGoAhead bool `json:"skip_go_ahead,omitempty"`
	// Log bounds the container's output in LogDir (size and number of
	// files, the rate the shim writes at). Required.
	Log containerlog.Limits `json:"log"`
	// Stdin gives the container a stdin pipe attach sessions write into
	// (without it stdin is /dev/null); Tty a terminal whose master the
	// shim holds (see output_linux.go), of TtySize when set.
	Stdin   bool      `json:"stdin,omitempty"`
	Tty     bool      `json:"tty,omitempty"`
	TtySize *TermSize `json:"tty_size,omitempty"`
	// Warm makes a warm sandbox rather than a container that runs Args
	// (empty then; UID, GID and OOMScoreAdj unset): the shim makes the
	// container as for a launch, with the exec trampoline blocked on a
	// pipe in place of the task, reports "ready" and waits on GoFD for
	// its claim: the directory whose bundle names the task (see
	// handshake.go). ID is the sandbox's name.
	Warm bool `json:"warm,omitempty"`
	// Sandbox is set in the bundle of a container made from a warm
	// sandbox: the name the sandbox was made under, which stays
	// libcontainer's ID of the container (StateRoot/<Sandbox>).
	Sandbox string `json:"sandbox,omitempty"`
}

// Data returns the directory of the sandbox and log of the container
// whose directory is dir.
func (b *Bundle) Data(dir string) string {
	if b.DataDir != "" {
		return b.DataDir
	}
	return dir
}

// RuntimeID returns libcontainer's ID of the bundle's container: ID, or
// the name of the warm sandbox it was made from.
func (b *Bundle) RuntimeID() string {
	if b.Sandbox != "" {
		return b.Sandbox
	}
	return b.ID
}

// ImageRoot is a container root made from an image: overlayfs of the
// image's unpacked layers (shared by every container of the image, never
// written) under the container's own upper and work dirs (the image
// store's snapshot). In a user namespace the shim mounts the layers
// id-mapped onto the namespace's range, so that the files the image
// gives root are the namespace root's, without a copy or a chown of any
// layer; the containerizer owns the upper dir to the range's root.
type ImageRoot struct {
	// Lower are the layers' directories, top first (overlay's order).
	Lower []string `json:"lower"`
	// Upper and Work are the container's: its writes land in Upper.
	Upper string `json:"upper"`
	Work  string `json:"work"`
	// ReadWrite makes the root writable; false mounts it read-only, as
	// the host root is (the sandbox, /tmp and the upper's mount points
	// stay as they are).
	ReadWrite bool `json:"read_write,omitempty"`
}

// validate checks an image root's paths.
func (r *ImageRoot) validate() error {
	if len(r.Lower) == 0 {
		return errors.New("image root without layers")
	}
	for _, p := range append(append([]string(nil), r.Lower...), r.Upper, r.Work) {
		if !filepath.IsAbs(p) || filepath.Clean(p) == "/" {
			return fmt.Errorf("image root: %q is not an absolute path below the root", p)
		}
	}
	return nil
}

// BundleVersion is the current Bundle format.
const BundleVersion = 1

// Validate checks the fields the shim relies on.
func (b *Bundle) Validate() error {
	switch {
	case b.Version != BundleVersion:
		return fmt.Errorf("bundle version %d: want %d", b.Version, BundleVersion)
	case !validID(b.ID):
		return fmt.Errorf("invalid container id %q", b.ID)
	case !filepath.IsAbs(b.CgroupPath) || filepath.Clean(b.CgroupPath) == "/":
		// An empty or relative path would land under the caller's own cgroup.
		return fmt.Errorf("cgroup path %q is not an absolute path below the root", b.CgroupPath)
	case !filepath.IsAbs(b.StateRoot):
		return fmt.Errorf("state root %q is not absolute", b.StateRoot)
	case b.DataDir != "" && (!filepath.IsAbs(b.DataDir) || filepath.Clean(b.DataDir) == "/"):
		return fmt.Errorf("data dir %q is not an absolute path below the root", b.DataDir)
	case b.Rootfs != "" && !filepath.IsAbs(b.Rootfs):
		return fmt.Errorf("rootfs %q is not absolute", b.Rootfs)
	case b.Rootfs != "" && b.Image != nil:
		return errors.New("both a rootfs and an image root")
	case b.OOMScoreAdj != nil && (*b.OOMScoreAdj < -1000 || *b.OOMScoreAdj > 1000):
		return fmt.Errorf("oom_score_adj %d outside [-1000, 1000]", *b.OOMScoreAdj)
	}
	if err := b.validateTask(); err != nil {
		return err
	}
	if err := b.Log.Validate(); err != nil {
		return err
	}
	if b.Image != nil {
		if err := b.Image.validate(); err != nil {
			return err
		}
	}
	if r := b.UserNS; r != nil {
		if err := r.Validate(); err != nil {
			return err
		}
		if !r.Contains(b.UID, b.GID) {
			return fmt.Errorf("user %d:%d is outside the user namespace's %d IDs", b.UID, b.GID, r.Size)
		}
	}
	for _, p := range b.HidePaths {
		if !filepath.IsAbs(p) || filepath.Clean(p) == "/" {
			return fmt.Errorf("hidden path %q is not an absolute path below the root", p)
		}
	}
	return nil
}

// validateTask checks the bundle's task: a command, or none for a warm
// sandbox (nor a user, oom_score_adj or sandbox name); no stdin or
// terminal for a warm sandbox or a container made from one.
func (b *Bundle) validateTask() error {
	switch {
	case b.Warm && (len(b.Args) > 0 || b.UID != 0 || b.GID != 0 || b.OOMScoreAdj != nil || b.Sandbox != ""):
		return errors.New("a warm sandbox's bundle names no command, user, oom_score_adj or sandbox")
	case !b.Warm && (len(b.Args) == 0 || b.Args[0] == ""):
		return errors.New("empty command")
	case (b.Warm || b.Sandbox != "") && (b.Stdin || b.Tty):
		// Made with the init, before any claim: a container that asks
		// for them is launched cold.
		return errors.New("a warm sandbox has no stdin or terminal")
	case b.Sandbox != "" && !validID(b.Sandbox):
		return fmt.Errorf("invalid sandbox name %q", b.Sandbox)
	}
	return nil
}

// validID mirrors libcontainer's ID rule, and keeps IDs usable as file names.
func validID(id string) bool {
	if id == "" || id == "." || id == ".." || len(id) > 200 {
		return false
	}
	for _, r := range id {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' ||
			r == '_' || r == '-' || r == '.' || r == '+'
		if !ok {
			return false
		}
	}
	return true
}

// ValidID reports whether id is acceptable as a container ID.
func ValidID(id string) bool { return validID(id) }

// WriteBundle writes b into dir atomically.
func WriteBundle(dir string, b *Bundle) error {
	return writeJSONAtomic(filepath.Join(dir, BundleFile), b)
}

// ReadBundle reads dir's Bundle.
func ReadBundle(dir string) (*Bundle, error) {
	var b Bundle
	if err := readJSON(filepath.Join(dir, BundleFile), &b); err != nil {
		return nil, err
	}
	return &b, nil
}

// ExitStatus records how a container ended (internal/exitstatus, the one
// definition); Signal is a number. exit.json stores it in the format shims
// have always written (see exitRecord).
type ExitStatus = exitstatus.Status

// Reasons in ExitStatus.Reason the shim and the containerizer set
// (internal/exitstatus, the one vocabulary).
const (
	// ReasonMemoryLimit: the memory limit was hit and the OOM killer ran.
	ReasonMemoryLimit = exitstatus.ReasonMemoryLimit
	// ReasonKilled: the container was killed on request (Kill).
	ReasonKilled = exitstatus.ReasonKilled
	// ReasonShimLost: the shim died without recording the exit status; the
	// containerizer killed what was left of the container.
	ReasonShimLost = exitstatus.ReasonShimLost
	// ReasonShimUnresponsive: the shim stopped answering its control
	// socket; the containerizer killed the shim and every process of the
	// container (through its cgroup) and recorded the exit itself.
	ReasonShimUnresponsive = exitstatus.ReasonShimUnresponsive
	// ReasonLost: the shim could not wait for the container's init.
	ReasonLost = exitstatus.ReasonLost
)

// exitRecord is ExitStatus as exit.json and the control protocol carry
// it: the format of protocol version 1 (snake_case, the signal's name),
// kept so that an agent and the shims of an earlier or later build still
// read each other's exits.
type exitRecord struct {
	Code       int       `json:"code"`
	Signal     string    `json:"signal,omitempty"`
	OOMKilled  bool      `json:"oom_killed,omitempty"`
	Reason     string    `json:"reason,omitempty"`
	Message    string    `json:"message,omitempty"`
	FinishedAt time.Time `json:"finished_at"`
}

func recordOf(st *ExitStatus) *exitRecord {
	if st == nil {
		return nil
	}
	return &exitRecord{Code: st.Code, Signal: exitstatus.SignalName(st.Signal), OOMKilled: st.OOMKilled,
		Reason: string(st.Reason), Message: st.Message, FinishedAt: st.FinishedAt}
}

func (r *exitRecord) status() *ExitStatus {
	if r == nil {
		return nil
	}
	return &ExitStatus{Code: r.Code, Signal: exitstatus.SignalNumber(r.Signal), OOMKilled: r.OOMKilled,
		Reason: exitstatus.Reason(r.Reason), Message: r.Message, FinishedAt: r.FinishedAt}
}

// WriteExit writes st as dir's exit.json atomically.
func WriteExit(dir string, st *ExitStatus) error {
	return writeJSONAtomic(filepath.Join(dir, ExitFile), recordOf(st))
}

// ReadExit reads dir's exit.json; the error wraps fs.ErrNotExist when the
// container has not exited (or its shim died before recording it).
func ReadExit(dir string) (*ExitStatus, error) {
	var rec exitRecord
	if err := readJSON(filepath.Join(dir, ExitFile), &rec); err != nil {
		return nil, err
	}
	return rec.status(), nil
}

// writeJSONAtomic replaces path with v's JSON. No fsync: the rename is
// atomic against a crash of the process, and a crash of the machine ends
// its containers anyway; two flushes per file would be paid by every
// launch.
func writeJSONAtomic(path string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s: %w", filepath.Base(path), err)
	}
	return atomicfile.WriteFileNoSync(path, data, 0o600)
}

func readJSON(path string, v any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read %s: %w", filepath.Base(path), err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("decode %s: %w", path, err)
	}
	return nil
}

// defaultPath is the PATH of a container whose Env sets none.
const defaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

func withPath(env []string) []string {
	for _, e := range env {
		if len(e) >= 5 && e[:5] == "PATH=" {
			return env
		}
	}
	return append(append([]string(nil), env...), defaultPath)
}

// PathOf returns the PATH value of env, or the default container PATH.
func PathOf(env []string) string {
	for _, e := range withPath(env) {
		if len(e) >= 5 && e[:5] == "PATH=" {
			return e[5:]
		}
	}
	return ""
}
