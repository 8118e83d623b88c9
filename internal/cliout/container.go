package cliout

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/brimnode/brim/agent/agentclient"
	"github.com/brimnode/brim/agent/agentpb"
)

// Containers writes the table of brim container ls; now dates CREATED.
func Containers(w io.Writer, list []*agentpb.Container, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tSTATE\tPID\tCPUS\tMEM\tCREATED\tEXIT")
	for _, c := range list {
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
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%dMiB\t%s ago\t%s\n", c.Id, c.Name, c.State, pid,
			CPUs(c.MilliCpus), c.MemMib, humanDuration(now.Sub(agentclient.TimeOf(c.CreatedAtUnixNano))), exit)
	}
	return tw.Flush()
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

// Stats writes brim container stats' rows, as a table or (asJSON) JSON.
func Stats(w io.Writer, rows []agentclient.Stats, asJSON bool) error {
	if asJSON {
		return JSON(w, rows)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tCPU%\tCPUS\tMEM USAGE / LIMIT\tMEM%\tPIDS\tTHROTTLED\tOOM KILLS\tNET RX / TX\tRUNQ P50/P99/P99.9\tON-CPU")
	for _, r := range rows {
		memPct := "-"
		if r.MemLimitBytes > 0 && r.MemLimitBytes < 1<<60 {
			memPct = fmt.Sprintf("%.1f%%", float64(r.MemUsageBytes)/float64(r.MemLimitBytes)*100)
		}
		pids := fmt.Sprint(r.Pids)
		if r.PidsLimit > 0 {
			pids += fmt.Sprintf("/%d", r.PidsLimit)
		}
		net := "-"
		if r.HasNet {
			net = fmt.Sprintf("%d B / %d B", r.NetRxBytes, r.NetTxBytes)
		}
		rq, onCPU := "-", "-"
		if q := r.RunQueue; q != nil {
			rq = fmt.Sprintf("%s/%s/%s (%s)", latency(q.P50Seconds), latency(q.P99Seconds), latency(q.P999Seconds), q.Source)
		}
		if r.OnCPUSeconds != nil {
			onCPU = fmt.Sprintf("%.2fs", *r.OnCPUSeconds)
		}
		fmt.Fprintf(tw, "%s\t%.1f%%\t%g\t%s / %s\t%s\t%s\t%d/%d periods, %.2fs\t%d\t%s\t%s\t%s\n", r.ID, r.CPUPercent, r.CPUs,
			mib(r.MemUsageBytes), mib(r.MemLimitBytes), memPct, pids, r.CPUThrottled, r.CPUPeriods, r.ThrottledSeconds, r.OOMKills, net, rq, onCPU)
	}
	return tw.Flush()
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

func mib(b uint64) string {
	if b >= 1<<60 {
		return "unlimited"
	}
	return fmt.Sprintf("%.1fMiB", float64(b)/(1<<20))
}
