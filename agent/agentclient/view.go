package agentclient

import (
	"fmt"
	"math"
	"time"

	"github.com/brimnode/brim/agent/agentpb"
)

// State is how a container stands, for a person: "running", "paused"
// (a user's pause), "frozen" (a QoS freeze), "exited", or the agent's
// state otherwise.
func State(c *agentpb.Container) string {
	switch {
	case c.State != "running":
		return c.State
	case c.Paused:
		return "paused"
	case c.QosFrozen:
		return "frozen"
	}
	return c.State
}

// ExitCode is the shell-style exit code of an exited container.
func ExitCode(c *agentpb.Container) int {
	e := c.GetExit()
	switch {
	case e == nil:
		return 1
	case e.Code != 0:
		return int(e.Code)
	case e.Signal != 0:
		return 128 + int(e.Signal)
	}
	return 0
}

// View is the stable JSON form of a container (brim container ls --json,
// inspect).
type View struct {
	ID       string   `json:"id"`
	Name     string   `json:"name"`
	State    string   `json:"state"`
	Pid      int32    `json:"pid,omitempty"`
	Command  []string `json:"command"`
	Rootfs   string   `json:"rootfs,omitempty"`
	User     string   `json:"user,omitempty"`
	UserNS   bool     `json:"userns,omitempty"`
	CPUs     float64  `json:"cpus"`
	MemMiB   int64    `json:"memMiB"`
	Pids     int64    `json:"pids,omitempty"`
	CPUQuota bool     `json:"cpuQuota,omitempty"`
	// CPULimitMode is how CPUs limit it: "shares", "quota" or "both".
	CPULimitMode string `json:"cpuLimitMode,omitempty"`
	// Paused: a user paused it; QoSFrozen: a QoS freeze holds it.
	Paused     bool              `json:"paused,omitempty"`
	QoSFrozen  bool              `json:"qosFrozen,omitempty"`
	Restarts   int32             `json:"restarts,omitempty"`
	Revocable  bool              `json:"revocable,omitempty"`
	CreatedAt  time.Time         `json:"createdAt"`
	StartedAt  *time.Time        `json:"startedAt,omitempty"`
	Exit       *ExitView         `json:"exit,omitempty"`
	SandboxDir string            `json:"sandboxDir,omitempty"`
	Labels     map[string]string `json:"labels,omitempty"`
	Quarantine string            `json:"quarantine,omitempty"`
	NetMbit    int64             `json:"netMbit,omitempty"`
	Address    string            `json:"address,omitempty"`
	Ports      []PortView        `json:"ports,omitempty"`
	// LogMaxSizeBytes and LogMaxFiles bound the container's output on
	// the agent's disk (absent for a container of an older agent).
	LogMaxSizeBytes int64 `json:"logMaxSizeBytes,omitempty"`
	LogMaxFiles     int32 `json:"logMaxFiles,omitempty"`
	// Image is the reference the container runs from, ImageID and
	// ImageDigest what it resolved to; ExposedPorts the image's hint.
	Image        string   `json:"image,omitempty"`
	ImageID      string   `json:"imageId,omitempty"`
	ImageDigest  string   `json:"imageDigest,omitempty"`
	ExposedPorts []string `json:"exposedPorts,omitempty"`
	ReadWrite    bool     `json:"readWrite,omitempty"`
	DiskMiB      int64    `json:"diskMiB,omitempty"`
	// Stdin and Tty: run with a stdin to attach to (-i), a terminal (-t).
	Stdin bool `json:"stdin,omitempty"`
	Tty   bool `json:"tty,omitempty"`
}

// ExitView is how a container ended, in View.
type ExitView struct {
	Code       int32     `json:"code"`
	Signal     int32     `json:"signal,omitempty"`
	OOMKilled  bool      `json:"oomKilled,omitempty"`
	Reason     string    `json:"reason,omitempty"`
	Message    string    `json:"message,omitempty"`
	FinishedAt time.Time `json:"finishedAt"`
}

// TimeOf is a Unix nanosecond time from the API; the zero time for 0.
func TimeOf(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}

// ViewOf converts an API container into its View.
func ViewOf(c *agentpb.Container) View {
	j := View{
		ID: c.Id, Name: c.Name, State: c.State, Pid: c.Pid, Command: c.Command, Rootfs: c.Rootfs, User: c.User, UserNS: c.Userns,
		CPUs: float64(c.MilliCpus) / 1000, MemMiB: c.MemMib, Pids: c.Pids, CPUQuota: c.CpuQuota,
		Revocable: c.Revocable, CreatedAt: TimeOf(c.CreatedAtUnixNano), SandboxDir: c.SandboxDir, Labels: c.Labels,
		Quarantine: c.Quarantine,
		NetMbit:    c.NetMbit, Address: c.Address, Ports: portViews(c.Ports),
		LogMaxSizeBytes: c.LogMaxSizeBytes, LogMaxFiles: c.LogMaxFiles, Stdin: c.Stdin, Tty: c.Tty,
		Image: c.Image, ImageID: c.ImageId, ImageDigest: c.ImageDigest, ExposedPorts: c.ExposedPorts,
		ReadWrite: c.ReadWrite, DiskMiB: c.DiskMib,
		CPULimitMode: c.CpuLimitMode, Paused: c.Paused, QoSFrozen: c.QosFrozen, Restarts: c.RestartCount,
	}
	if c.StartedAtUnixNano != 0 {
		t := TimeOf(c.StartedAtUnixNano)
		j.StartedAt = &t
	}
	if e := c.Exit; e != nil {
		j.Exit = &ExitView{Code: e.Code, Signal: e.Signal, OOMKilled: e.OomKilled, Reason: e.Reason, Message: e.Message, FinishedAt: TimeOf(e.FinishedAtUnixNano)}
	}
	return j
}

// Stats is one computed stats line (brim container stats).
type Stats struct {
	ID               string  `json:"id"`
	Name             string  `json:"name,omitempty"`
	CPUPercent       float64 `json:"cpuPercent"`
	CPUs             float64 `json:"cpus"`
	CPUUsageSeconds  float64 `json:"cpuUsageSeconds"`
	MemUsageBytes    uint64  `json:"memUsageBytes"`
	MemLimitBytes    uint64  `json:"memLimitBytes"`
	Pids             uint64  `json:"pids"`
	PidsLimit        uint64  `json:"pidsLimit,omitempty"`
	CPUPeriods       uint64  `json:"cpuPeriods"`
	CPUThrottled     uint64  `json:"cpuThrottledPeriods"`
	ThrottledSeconds float64 `json:"cpuThrottledSeconds"`
	// ThrottledPercent is the share of the interval's CFS periods in
	// which the container was throttled (nil without a quota).
	ThrottledPercent *float64 `json:"cpuThrottledPercent"`
	OOMKills         uint64   `json:"oomKills"`
	// Network counters, when the container has its own network.
	NetRxBytes uint64 `json:"netRxBytes,omitempty"`
	NetTxBytes uint64 `json:"netTxBytes,omitempty"`
	HasNet     bool   `json:"hasNet,omitempty"`
	// Scheduler signals from the agent's monitor (null when the agent
	// runs without one or has not sampled the container twice yet).
	RunQueue     *RunQueue `json:"runqueue"`
	OnCPUSeconds *float64  `json:"onCpuSeconds"`
}

// RunQueue is a container's run-queue latency over the monitor's
// latest interval. Source "schedstat-mean" has only the mean wait: the
// three quantiles are that mean.
type RunQueue struct {
	Source      string  `json:"source"`
	P50Seconds  float64 `json:"p50Seconds"`
	P99Seconds  float64 `json:"p99Seconds"`
	P999Seconds float64 `json:"p999Seconds"`
}

// ComputeStats computes b's line; the cpu percentage is over the interval
// since the earlier sample a (0 when the interval or the counter does not
// advance).
func ComputeStats(a, b *agentpb.Statistics) Stats {
	s := Stats{
		ID: b.Id, Name: b.Name, CPUs: float64(b.MilliCpus) / 1000, CPUUsageSeconds: float64(b.CpuUsageNanos) / 1e9,
		MemUsageBytes: b.MemUsageBytes, MemLimitBytes: b.MemLimitBytes, Pids: b.Pids, PidsLimit: b.PidsLimit,
		CPUPeriods: b.CpuPeriods, CPUThrottled: b.CpuThrottled, ThrottledSeconds: float64(b.CpuThrottledNanos) / 1e9,
		OOMKills: b.MemOomKills,
		HasNet:   b.HasNet, NetRxBytes: b.NetRxBytes, NetTxBytes: b.NetTxBytes,
	}
	if b.HasRunqueue {
		s.RunQueue = &RunQueue{Source: b.RunqueueSource, P50Seconds: float64(b.RunqueueP50Nanos) / 1e9,
			P99Seconds: float64(b.RunqueueP99Nanos) / 1e9, P999Seconds: float64(b.RunqueueP999Nanos) / 1e9}
	}
	if b.HasOnCpu {
		v := float64(b.OnCpuNanos) / 1e9
		s.OnCPUSeconds = &v
	}
	if dp := int64(b.CpuPeriods) - int64(a.CpuPeriods); dp > 0 && b.CpuThrottled >= a.CpuThrottled {
		v := math.Round(float64(b.CpuThrottled-a.CpuThrottled)/float64(dp)*1000) / 10
		s.ThrottledPercent = &v
	}
	if dt := b.TimestampUnixNano - a.TimestampUnixNano; dt > 0 && b.CpuUsageNanos >= a.CpuUsageNanos {
		s.CPUPercent = math.Round(float64(b.CpuUsageNanos-a.CpuUsageNanos)/float64(dt)*1000) / 10
	}
	return s
}

// ImageView is the stable JSON form of a cached image (brim image ls
// --json).
type ImageView struct {
	ID           string    `json:"id"`
	Digest       string    `json:"digest,omitempty"`
	Refs         []string  `json:"refs"`
	Platform     string    `json:"platform,omitempty"`
	Layers       int32     `json:"layers"`
	SizeBytes    int64     `json:"sizeBytes"`
	Pulled       time.Time `json:"pulled"`
	LastUsed     time.Time `json:"lastUsed"`
	Containers   []string  `json:"containers"`
	Entrypoint   []string  `json:"entrypoint,omitempty"`
	Cmd          []string  `json:"cmd,omitempty"`
	Env          []string  `json:"env,omitempty"`
	WorkingDir   string    `json:"workingDir,omitempty"`
	User         string    `json:"user,omitempty"`
	ExposedPorts []string  `json:"exposedPorts,omitempty"`
}

// ImageViews converts brim image ls's answer into its views (a list,
// never null).
func ImageViews(r *agentpb.ListImagesResponse) []ImageView {
	out := make([]ImageView, 0, len(r.Images))
	for _, i := range r.Images {
		v := ImageView{ID: i.Id, Digest: i.Digest, Refs: i.Refs, Platform: i.Platform, Layers: i.Layers, SizeBytes: i.Size,
			Pulled: TimeOf(i.PulledUnixNano), LastUsed: TimeOf(i.LastUsedUnixNano), Containers: i.Containers,
			Entrypoint: i.Entrypoint, Cmd: i.Cmd, Env: i.Env, WorkingDir: i.WorkingDir, User: i.User, ExposedPorts: i.ExposedPorts}
		if v.Refs == nil {
			v.Refs = []string{}
		}
		if v.Containers == nil {
			v.Containers = []string{}
		}
		out = append(out, v)
	}
	return out
}

// ExitCause says why an exited container ended when its exit code alone
// does not: the kernel's OOM killer at its memory limit (exit 137, as any
// SIGKILL). Empty otherwise.
func ExitCause(c *agentpb.Container) string {
	e := c.GetExit()
	if e == nil || (!e.OomKilled && e.Reason != ReasonMemoryLimit) {
		return ""
	}
	return fmt.Sprintf("container %s was killed by the kernel's OOM killer at its memory limit (%d MiB); exit %d", c.Id, c.MemMib, ExitCode(c))
}

// ReasonMemoryLimit is the exit reason of a container the OOM killer
// ended at its memory limit (the agent's agent.ReasonMemoryLimit).
const ReasonMemoryLimit = "memory-limit"
