package cliout

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/brimnode/brim/agent/agentclient"
	"github.com/brimnode/brim/agent/agentpb"
)

// ContainerRow is a container as brim container ls --format sees it:
// every field a string (Docker's names where Docker has the field: Names,
// RunningFor, Label).
type ContainerRow struct {
	ID, Name, Names, State, PID string
	CPUs, CPUMode, Mem, Pids    string
	Command, User, Revocable    string
	Created, CreatedAt          string // "1m ago"; RFC 3339
	RunningFor                  string // Docker's name of Created
	Exit, Restarts              string
	Address, Ports, Labels      string

	labels map[string]string
	header bool
}

// Label is the value of label key ("" without it).
func (r ContainerRow) Label(key string) string {
	if r.header {
		return strings.ToUpper(key)
	}
	return r.labels[key]
}

// containerHeader titles ContainerRow's fields in a table.
var containerHeader = ContainerRow{
	ID: "ID", Name: "NAME", Names: "NAMES", State: "STATE", PID: "PID", CPUs: "CPUS", CPUMode: "CPU MODE",
	Mem: "MEM", Pids: "PIDS", Command: "COMMAND", User: "USER", Revocable: "REVOCABLE",
	Created: "CREATED", CreatedAt: "CREATED AT", RunningFor: "CREATED", Exit: "EXIT", Restarts: "RESTARTS",
	Address: "ADDRESS", Ports: "PORTS", Labels: "LABELS", header: true,
}

// containersTable is brim container ls's default table.
const containersTable = "table {{.ID}}\t{{.Name}}\t{{.State}}\t{{.PID}}\t{{.CPUs}}\t{{.CPUMode}}\t{{.Mem}}\t{{.Created}}\t{{.Exit}}"

// ContainerRowOf is c's row; now dates Created.
func ContainerRowOf(c *agentpb.Container, now time.Time) ContainerRow {
	pid, exit := "-", "-"
	if c.State == "running" && c.Pid != 0 {
		pid = fmt.Sprint(c.Pid)
	}
	if e := c.Exit; e != nil {
		exit = fmt.Sprint(agentclient.ExitCode(c))
		if e.Reason != "" {
			exit += " (" + e.Reason + ")"
		}
	}
	pids := "-"
	if c.Pids > 0 {
		pids = fmt.Sprint(c.Pids)
	}
	created := agentclient.TimeOf(c.CreatedAtUnixNano)
	ago := humanDuration(now.Sub(created)) + " ago"
	var ports []string
	for _, p := range c.Ports {
		hp := p.HostIp
		if hp != "" {
			hp += ":"
		}
		ports = append(ports, fmt.Sprintf("%s%d->%d/%s", hp, p.HostPort, p.ContainerPort, p.Protocol))
	}
	var labels []string
	for _, k := range slices.Sorted(maps.Keys(c.Labels)) {
		labels = append(labels, k+"="+c.Labels[k])
	}
	return ContainerRow{
		ID: c.Id, Name: c.Name, Names: c.Name, State: agentclient.State(c), PID: pid,
		CPUs: CPUs(c.MilliCpus), CPUMode: dash(c.CpuLimitMode), Mem: fmt.Sprintf("%dMiB", c.MemMib), Pids: pids,
		Command: strings.Join(c.Command, " "), User: c.User, Revocable: strconv.FormatBool(c.Revocable),
		Created: ago, RunningFor: ago, CreatedAt: created.Format(time.RFC3339), Exit: exit, Restarts: fmt.Sprint(c.RestartCount),
		Address: c.Address, Ports: strings.Join(ports, ","), Labels: strings.Join(labels, ","), labels: c.Labels,
	}
}

// Containers writes brim container ls's rows as f says (nil: the default
// table); now dates CREATED.
func Containers(w io.Writer, f *Format, list []*agentpb.Container, now time.Time) error {
	if f == nil || f.Default() {
		var err error
		if f, err = ParseFormat(containersTable); err != nil {
			return err
		}
	}
	rows := make([]ContainerRow, len(list))
	for i, c := range list {
		rows[i] = ContainerRowOf(c, now)
	}
	return Write(w, f, containerHeader, rows)
}

// CPUs formats thousandths of a cpu as cpus without trailing zeros
// ("0.25", "2").
func CPUs(milli int64) string {
	return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.3f", float64(milli)/1000), "0"), ".")
}

func humanDuration(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// StatsRow is a stats line as brim container stats --format sees it
// (Docker's names where Docker has the field: Container, CPUPerc,
// MemUsage, MemPerc, NetIO, PIDs).
type StatsRow struct {
	ID, Name, Container string
	CPUPerc, CPUs       string
	Throttled           string // throttled share of the interval's CFS periods ("-" without a quota)
	ThrottledTotal      string // throttled periods and time since the start
	MemUsage, MemPerc   string
	PIDs, OOMKills      string
	NetIO               string
	RunQueue, OnCPU     string
}

var statsHeader = StatsRow{
	ID: "ID", Name: "NAME", Container: "CONTAINER", CPUPerc: "CPU %", CPUs: "CPUS", Throttled: "THROTTLED",
	ThrottledTotal: "THROTTLED TOTAL", MemUsage: "MEM USAGE / LIMIT", MemPerc: "MEM %", PIDs: "PIDS",
	OOMKills: "OOM KILLS", NetIO: "NET RX / TX", RunQueue: "RUNQ P50/P99/P99.9", OnCPU: "ON-CPU",
}

// statsTable is brim container stats's default table: at most 100
// columns wide (ID 12, NAME cut at 14, the figures at their widest).
const statsTable = "table {{.ID}}\t{{truncate .Name 14}}\t{{.CPUPerc}}\t{{.Throttled}}\t{{.MemUsage}}\t{{.MemPerc}}\t{{.PIDs}}\t{{.NetIO}}"

// StatsRowOf is r's row.
func StatsRowOf(r agentclient.Stats) StatsRow {
	memPct := "-"
	if r.MemLimitBytes > 0 && r.MemLimitBytes < 1<<60 {
		memPct = fmt.Sprintf("%.1f%%", float64(r.MemUsageBytes)/float64(r.MemLimitBytes)*100)
	}
	net, rq, onCPU, thr := "-", "-", "-", "-"
	if r.HasNet {
		net = decimalBytes(r.NetRxBytes) + " / " + decimalBytes(r.NetTxBytes)
	}
	if q := r.RunQueue; q != nil {
		rq = fmt.Sprintf("%s/%s/%s (%s)", latency(q.P50Seconds), latency(q.P99Seconds), latency(q.P999Seconds), q.Source)
	}
	if r.OnCPUSeconds != nil {
		onCPU = fmt.Sprintf("%.2fs", *r.OnCPUSeconds)
	}
	if r.ThrottledPercent != nil {
		thr = fmt.Sprintf("%.1f%%", *r.ThrottledPercent)
	}
	name := r.Name
	if name == "" {
		name = r.ID
	}
	return StatsRow{
		ID: r.ID, Name: name, Container: name, CPUPerc: fmt.Sprintf("%.1f%%", r.CPUPercent), CPUs: fmt.Sprintf("%g", r.CPUs),
		Throttled: thr, ThrottledTotal: fmt.Sprintf("%d/%d periods, %.2fs", r.CPUThrottled, r.CPUPeriods, r.ThrottledSeconds),
		MemUsage: binaryBytes(r.MemUsageBytes) + " / " + binaryBytes(r.MemLimitBytes), MemPerc: memPct,
		PIDs: fmt.Sprint(r.Pids), OOMKills: fmt.Sprint(r.OOMKills), NetIO: net, RunQueue: rq, OnCPU: onCPU,
	}
}

// Stats writes brim container stats' rows as f says (nil: the default
// table), or asJSON as one JSON array of agentclient.Stats.
func Stats(w io.Writer, f *Format, rows []agentclient.Stats, asJSON bool) error {
	if asJSON {
		return JSON(w, rows)
	}
	if f == nil || f.Default() {
		var err error
		if f, err = ParseFormat(statsTable); err != nil {
			return err
		}
	}
	out := make([]StatsRow, len(rows))
	for i, r := range rows {
		out[i] = StatsRowOf(r)
	}
	return Write(w, f, statsHeader, out)
}

// latency formats a latency in seconds to three significant digits
// ("12.3µs", "4.56ms").
func latency(sec float64) string {
	d := time.Duration(sec * 1e9)
	for _, u := range []time.Duration{time.Second, time.Millisecond, time.Microsecond} {
		if d >= 100*u {
			return d.Round(u).String()
		}
		if d >= 10*u {
			return d.Round(u / 10).String()
		}
		if d >= u {
			return d.Round(u / 100).String()
		}
	}
	return d.String()
}

// binaryBytes formats a size in KiB, MiB, GiB… to three significant
// digits ("9.8MiB", "128MiB"); "unlimited" for a limit of none.
func binaryBytes(b uint64) string {
	if b >= 1<<60 {
		return "unlimited"
	}
	return sized(float64(b), 1024, []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"})
}

// decimalBytes formats a byte count in kB, MB, GB… (network counters, as
// Docker does) to three significant digits.
func decimalBytes(b uint64) string {
	return sized(float64(b), 1000, []string{"B", "kB", "MB", "GB", "TB", "PB", "EB"})
}

func sized(v, base float64, units []string) string {
	i := 0
	for v >= base && i < len(units)-1 {
		v /= base
		i++
	}
	switch {
	case i == 0:
		return fmt.Sprintf("%.0f%s", v, units[i])
	case v < 10:
		return fmt.Sprintf("%.2f%s", v, units[i])
	case v < 100:
		return fmt.Sprintf("%.1f%s", v, units[i])
	}
	return fmt.Sprintf("%.0f%s", v, units[i])
}
