// Command qos-plugin is an example out-of-process brim QoS controller: when
// the host's 1-minute load average per cpu exceeds a threshold (first
// argument, default 1.5), it kills the youngest revocable container, one
// per call.
//
//	brim agent --qos 'plugin:/path/to/qos-plugin 1.5'
//
// The agent starts it; it is not meant to be run by hand.
package main

import (
	"context"
	"fmt"
	"os"
	"strconv"

	"github.com/brimnode/brim/monitor"
	"github.com/brimnode/brim/qos"
)

type loadKiller struct{ perCPU float64 }

func (l *loadKiller) Corrections(_ context.Context, u monitor.Usage) ([]qos.Correction, error) {
	thr := l.perCPU * float64(max(u.Host.NumCPU, 1))
	if u.Host.Load1 <= thr {
		return nil, nil
	}
	var youngest *monitor.ContainerUsage
	for i := range u.Containers {
		c := &u.Containers[i]
		// One being killed already (Stopping) frees its share soon: the
		// next youngest is the one to kill.
		if c.Revocable && !c.Stopping && (youngest == nil || c.StartedAt.After(youngest.StartedAt)) {
			youngest = c
		}
	}
	if youngest == nil {
		return nil, nil
	}
	return []qos.Correction{{
		Type: qos.Kill, ContainerID: youngest.ID,
		Reason:  fmt.Sprintf("example plugin: load1 %.2f > %.2f", u.Host.Load1, thr),
		Trigger: qos.Trigger{Signal: "load1", Value: u.Host.Load1, Threshold: thr},
	}}, nil
}

func main() {
	perCPU := 1.5
	if len(os.Args) > 1 {
		f, err := strconv.ParseFloat(os.Args[1], 64)
		if err != nil {
			fmt.Fprintln(os.Stderr, "qos-plugin: threshold:", err)
			os.Exit(2)
		}
		perCPU = f
	}
	qos.Serve(&loadKiller{perCPU: perCPU})
}
