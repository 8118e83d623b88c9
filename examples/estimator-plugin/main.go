// Command estimator-plugin is an example out-of-process brim resource
// estimator: like the built-in fixed estimator, it offers a configured
// amount minus the revocable resources already allocated.
//
//	brim agent --estimator 'plugin:/path/to/estimator-plugin cpus:2;mem:1024'
//
// The agent starts it; it is not meant to be run by hand.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/brimnode/brim/estimator"
	"github.com/brimnode/brim/monitor"
	"github.com/brimnode/brim/resources"
)

type fixedLike struct {
	total resources.Resources
}

func (f *fixedLike) Estimate(_ context.Context, u monitor.Usage) (estimator.Estimate, error) {
	inUse := u.Allocated(true)
	used := estimator.MarkRevocable(resources.Resources{
		{Name: resources.CPUs, Scalar: resources.Value(inUse.MilliCPUs)},
		{Name: resources.Mem, Scalar: resources.FromFloat(float64(inUse.MemoryBytes) / (1 << 20))},
	})
	avail := f.total.Subtract(used)
	return estimator.Estimate{
		Revocable: avail,
		Explanation: estimator.Explanation{
			Summary: fmt.Sprintf("example plugin: configured %s − in use %s", f.total, used),
			Terms: []estimator.Term{
				{Name: "configured cpus", Value: f.total.CPUs().Float64(), Unit: "cpus"},
				{Name: "revocable allocated cpus", Value: float64(inUse.MilliCPUs) / 1000, Unit: "cpus"},
				{Name: "offer cpus", Value: avail.CPUs().Float64(), Unit: "cpus"},
			},
		},
	}, nil
}

func main() {
	text := "cpus:1;mem:512"
	if len(os.Args) > 1 {
		text = os.Args[1]
	}
	r, err := resources.Parse(text)
	if err != nil {
		fmt.Fprintln(os.Stderr, "estimator-plugin:", err)
		os.Exit(2)
	}
	estimator.Serve(&fixedLike{total: estimator.MarkRevocable(r)})
}
