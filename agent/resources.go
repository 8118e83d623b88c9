package agent

import (
	"log/slog"

	"github.com/brimnode/brim/resources"
)

// Resources are a container's accounted limits — cpus, mem, net_bw, disk —
// as the agent's API carries them: cpus in thousandths (the resource
// model's fixed point), memory in MiB, network bandwidth (net_bw) in
// Mbit/s. It is a view, not a second resource model: accounting, text and
// arithmetic are package resources' (Model, the ledger); cmd/brim converts
// the operator's --resources into it.
type Resources struct {
	MilliCPUs int64
	MemMiB    int64
	NetMbit   int64
	// DiskMiB is disk in MiB: on the agent, what its containers' roots
	// may write besides the image cache (docs/images.md); on a
	// container, the limit of its read-write image root.
	DiskMiB int64
}

// Model returns r in the resource model: unreserved scalars cpus, mem and
// net_bw (zero ones left out).
func (r Resources) Model() resources.Resources {
	return resources.Resources{
		{Name: resources.CPUs, Scalar: resources.Value(r.MilliCPUs)},
		{Name: resources.Mem, Scalar: resources.FromInt(r.MemMiB)},
		{Name: resources.NetBandwidth, Scalar: resources.FromInt(r.NetMbit)},
		{Name: resources.Disk, Scalar: resources.FromInt(r.DiskMiB)},
	}.Add(nil)
}

// resourcesOf returns the cpus, mem and net_bw of m (any role or
// revocability); other resources are not the agent's to account.
func resourcesOf(m resources.Resources) Resources {
	return Resources{MilliCPUs: int64(m.CPUs()), MemMiB: int64(m.Mem()) / 1000, NetMbit: int64(m.NetBandwidth()) / 1000,
		DiskMiB: int64(m.Disk()) / 1000}
}

// String formats r in the Mesos text syntax ("cpus:1.5;mem:1024"), leaving
// out zero resources unless r is empty.
func (r Resources) String() string {
	if s := r.Model().String(); s != "" {
		return s
	}
	return "cpus:0;mem:0"
}

// LogValue logs r in its text form ("cpus:0.5;mem:64"), not as a struct.
func (r Resources) LogValue() slog.Value { return slog.StringValue(r.String()) }

var _ slog.LogValuer = Resources{}

// FormatMilli formats thousandths as a decimal without trailing zeros
// (1500 → "1.5", 2000 → "2"): the resource model's Value text.
func FormatMilli(m int64) string { return resources.Value(m).String() }
