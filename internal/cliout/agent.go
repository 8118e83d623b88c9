package cliout

import (
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/brimnode/brim/agent/agentclient"
	"github.com/brimnode/brim/agent/agentpb"
	"github.com/brimnode/brim/internal/bytesize"
)

// AgentInfo writes brim agent info. ex is the agent's explanation, asked
// for only when the agent runs an estimator (in.Estimator set); its
// current estimate and active corrections are shown.
func AgentInfo(w io.Writer, in *agentpb.AgentInfoResponse, ex *agentpb.ExplainResponse) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "id\t%s\nversion\t%s\nstate dir\t%s\ncgroup parent\t%s\n", in.Id, in.Version, in.StateDir, in.CgroupParent)
	if in.CpuLimitMode != "" {
		fmt.Fprintf(tw, "cpu limit mode\t%s (containers that name none)\n", in.CpuLimitMode)
	}
	fmt.Fprintf(tw, "resources total\t%s\nresources used\t%s\nresources free\t%s\n", in.ResourcesTotal, in.ResourcesUsed, in.ResourcesFree)
	fmt.Fprintf(tw, "containers\t%d running, %d exited\n", in.ContainersRunning, in.ContainersExited)
	fmt.Fprintf(tw, "checkpoint\t%s\n", checkpointText(in))
	if in.LogMaxFiles > 0 {
		fmt.Fprintf(tw, "container logs\t%d files of %s at most each (default)\n", in.LogMaxFiles, bytesize.Format(in.LogMaxSizeBytes))
	}
	if in.ImageCacheBytes > 0 || in.ImageCacheMaxBytes > 0 {
		fmt.Fprintf(tw, "image cache\t%s (%s)\n", MiB(in.ImageCacheBytes), capText(in.ImageCacheMaxBytes))
	}
	if in.WarmSandboxesOff {
		fmt.Fprintf(tw, "warm sandboxes\toff\n")
	} else if in.WarmSandboxesReady+in.WarmSandboxesFilling > 0 || in.LaunchesWarm+in.LaunchesCold > 0 {
		fmt.Fprintf(tw, "warm sandboxes\t%d ready (%s), %d being made; launches %d warm, %d cold\n", in.WarmSandboxesReady,
			bytesize.Format(in.WarmSandboxesMemoryBytes), in.WarmSandboxesFilling, in.LaunchesWarm, in.LaunchesCold)
	}
	for _, q := range in.Quarantined {
		fmt.Fprintf(tw, "quarantined record\t%s (container %s): %s\n", q.File, q.Container, q.Error)
	}
	if in.Estimator != "" {
		fmt.Fprintf(tw, "estimator\t%s\nqos controller\t%s\nrun-queue source\t%s\n", in.Estimator, in.QosController, orNone(in.RunqueueSource))
		fmt.Fprintf(tw, "revocable total\t%s\nrevocable used\t%s\nrevocable free\t%s\n", in.RevocableTotal, in.RevocableUsed, in.RevocableFree)
		fmt.Fprintf(tw, "corrections active\t%d\n", in.CorrectionsActive)
		if e := ex.GetCurrent(); e != nil {
			fmt.Fprintf(tw, "revocable estimate\t%s (%s: %s)\n", orNone(e.Revocable), e.Estimator, e.Summary)
		}
		for _, c := range ex.GetActive() {
			t := c.Trigger
			if t == nil {
				t = &agentpb.Trigger{}
			}
			fmt.Fprintf(tw, "correction\t%s %s: %s %.4g (baseline %.4g, threshold %.4g) of %s\n",
				c.Type, c.ContainerId, t.Signal, t.Value, t.Baseline, t.Threshold, orNone(t.Victim))
		}
	}
	return tw.Flush()
}

// checkpointText says whether the agent's checkpoint is on disk.
func checkpointText(in *agentpb.AgentInfoResponse) string {
	switch {
	case in.CheckpointError == "" && in.StateDirFull:
		return "written; STATE DIR FULL: new launches fail until space is freed"
	case in.CheckpointError == "":
		return "written"
	case in.StateDirFull:
		return fmt.Sprintf("STATE DIR FULL: %d record(s) kept in memory, written once there is space (%s)", in.CheckpointUnsaved, in.CheckpointError)
	}
	return fmt.Sprintf("WRITE FAILING: %d record(s) kept in memory, retried (%s)", in.CheckpointUnsaved, in.CheckpointError)
}

// Explain writes brim agent explain's text.
func Explain(w io.Writer, ex agentclient.Explain) error {
	if !ex.Enabled {
		_, err := fmt.Fprintln(w, "oversubscription is not enabled on this agent")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if e := ex.Current; e != nil {
		fmt.Fprintf(tw, "estimator\t%s\nestimate\t%s\t(computed %s)\nsummary\t%s\n", e.Estimator, orNone(e.Revocable), e.ComputedAt.Format(time.RFC3339), e.Summary)
		for _, t := range e.Terms {
			fmt.Fprintf(tw, "  %s\t%s %s\t%s\n", t.Name, strconv.FormatFloat(t.Value, 'g', 6, 64), t.Unit, t.Note)
		}
	}
	if e := ex.Forwarded; e != nil {
		fmt.Fprintf(tw, "last forwarded\t%s\t(computed %s)\n", orNone(e.Revocable), e.ComputedAt.Format(time.RFC3339))
	} else {
		fmt.Fprintf(tw, "last forwarded\tnone\n")
	}
	if ex.Blocking != "" {
		fmt.Fprintf(tw, "blocked\t%s\n", ex.Blocking)
	}
	fmt.Fprintf(tw, "revocable pool\t%s\nrevocable used\t%s\nrevocable free\t%s\n", ex.RevocableTotal, ex.RevocableUsed, ex.RevocableFree)
	fmt.Fprintf(tw, "qos controller\t%s\nrun-queue source\t%s\n", ex.QoS, orNone(ex.RunQueueSource))
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, part := range []struct {
		title string
		cs    []agentclient.Correction
	}{{"active corrections", ex.Active}, {"recent corrections", ex.Recent}} {
		fmt.Fprintf(w, "\n%s: %d\n", part.title, len(part.cs))
		if len(part.cs) == 0 {
			continue
		}
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TYPE\tCONTAINER\tSIGNAL\tVALUE\tBASELINE\tTHRESHOLD\tVICTIM\tAT\tREASON")
		for _, c := range part.cs {
			at := ""
			if c.At != nil {
				at = c.At.Format("15:04:05.000")
			}
			reason := c.Reason
			if c.Error != "" {
				reason += " (failed: " + c.Error + ")"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%.4g\t%.4g\t%.4g\t%s\t%s\t%s\n", c.Type, c.Container, c.Trigger.Signal,
				c.Trigger.Value, c.Trigger.Baseline, c.Trigger.Threshold, c.Trigger.Victim, at, reason)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}
