package estimator

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/brimnode/brim/monitor"
	"github.com/brimnode/brim/resources"
)

// Noop never offers anything.
type Noop struct{}

var _ Estimator = Noop{}

// NewNoop is the noop factory; it takes no options.
func NewNoop(Options, *slog.Logger) (Estimator, error) { return Noop{}, nil }

// Estimate implements Estimator.
func (Noop) Estimate(context.Context, monitor.Usage) (Estimate, error) {
	return Estimate{Explanation: Explanation{Estimator: "noop", Summary: "the noop estimator never offers revocable resources"}}, nil
}

// Fixed offers a configured amount minus the revocable resources already
// allocated to containers (Mesos's fixed estimator).
type Fixed struct {
	total resources.Resources
}

var _ Estimator = (*Fixed)(nil)

// NewFixed is the fixed factory. Option "resources" (required) is the
// amount in Mesos text syntax, e.g. "cpus:2;mem:1024".
func NewFixed(opts Options, _ *slog.Logger) (Estimator, error) {
	text := opts["resources"]
	if text == "" {
		return nil, fmt.Errorf("fixed estimator: option resources is required: %w", ErrInvalidOption)
	}
	r, err := resources.Parse(text)
	if err != nil {
		return nil, fmt.Errorf("fixed estimator: parse resources: %w: %w", ErrInvalidOption, err)
	}
	return &Fixed{total: MarkRevocable(r)}, nil
}

// Estimate implements Estimator.
func (f *Fixed) Estimate(_ context.Context, u monitor.Usage) (Estimate, error) {
	inUse := u.Allocated(true)
	used := revocable(float64(inUse.MilliCPUs)/1000, float64(inUse.MemoryBytes)/mib)
	avail := f.total.Subtract(used)
	return Estimate{
		Revocable: avail,
		Explanation: Explanation{
			Estimator: "fixed",
			Summary:   fmt.Sprintf("configured %s − allocated to revocable containers %s = %s", f.total, used, avail),
			Terms: []Term{
				{Name: "configured cpus", Value: f.total.CPUs().Float64(), Unit: "cpus"},
				{Name: "configured mem", Value: f.total.Mem().Float64(), Unit: "MiB"},
				{Name: "revocable allocated cpus", Value: float64(inUse.MilliCPUs) / 1000, Unit: "cpus"},
				{Name: "revocable allocated mem", Value: float64(inUse.MemoryBytes) / mib, Unit: "MiB"},
				{Name: "offer cpus", Value: avail.CPUs().Float64(), Unit: "cpus"},
				{Name: "offer mem", Value: avail.Mem().Float64(), Unit: "MiB"},
			},
		},
	}, nil
}
