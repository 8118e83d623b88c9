package network

import "github.com/brimnode/brim/isolator"

// HTB class priorities: guaranteed classes are served and lent to first.
const (
	prioGuaranteed = 0
	prioBestEffort = 7
)

// bestEffortRateMbit is the rate a best-effort class is assured of: just
// enough to keep its connections alive while guaranteed classes use the
// uplink; everything above it is borrowed.
const bestEffortRateMbit = 1

// classSpec is one HTB class, computed from a container's limits (pure, so
// it is table-tested apart from netlink).
type classSpec struct {
	Rate    uint64 // bit/s assured
	Ceil    uint64 // bit/s at most, borrowing included
	Prio    uint32
	Quantum uint32 // bytes per DRR round among classes of the same priority
}

const mbit = 1_000_000

// classFor returns the HTB class for limits on an uplink of hostMbit.
// Guaranteed: rate = ceil = the limit (the uplink when unlimited), highest
// priority. Best-effort: a minimal rate, ceil = the limit (the uplink when
// unlimited), lowest priority, so it borrows idle bandwidth and yields it.
func classFor(l isolator.Limits, hostMbit int64) classSpec {
	limit := l.NetBandwidthMbit
	if limit <= 0 || limit > hostMbit {
		limit = hostMbit
	}
	var s classSpec
	if l.Class == isolator.BestEffort {
		rate := int64(bestEffortRateMbit)
		if rate > limit {
			rate = limit
		}
		s = classSpec{Rate: uint64(rate) * mbit, Ceil: uint64(limit) * mbit, Prio: prioBestEffort}
	} else {
		s = classSpec{Rate: uint64(limit) * mbit, Ceil: uint64(limit) * mbit, Prio: prioGuaranteed}
	}
	s.Quantum = quantum(s.Rate)
	return s
}

// parentFor is the class every container class borrows from: the uplink.
func parentFor(hostMbit int64) classSpec {
	r := uint64(hostMbit) * mbit
	return classSpec{Rate: r, Ceil: r, Quantum: quantum(r)}
}

// quantum follows HTB's rate/r2q (r2q = 10) clamped to the range the kernel
// accepts without a warning (at least an MTU, at most 200000 bytes).
func quantum(rateBit uint64) uint32 {
	q := rateBit / 8 / 10
	switch {
	case q < 1600:
		q = 1600
	case q > 200000:
		q = 200000
	}
	return uint32(q)
}

// Leaf queue bounds. HTB's leaves default to a pfifo of the device's
// txqueuelen packets (1000 on the IFBs): at 20 Mbit/s a full one is 600 ms
// of delay for every packet behind a download, ping included. A bfifo
// holding leafQueueMillis of the class's ceiling keeps TCP at full
// goodput (it needs about one round trip's worth of buffer) and bounds the
// delay a queue adds; minLeafQueueBytes keeps slow classes from dropping
// every burst.
const (
	leafQueueMillis   = 50
	minLeafQueueBytes = 10 * 1514
	maxLeafQueueBytes = 64 << 20
)

// leafQueueBytes is the byte limit of the bfifo under a class s: its
// ceiling (what it sends at most) times leafQueueMillis, within
// [minLeafQueueBytes, maxLeafQueueBytes].
func leafQueueBytes(s classSpec) uint32 {
	b := s.Ceil / 8 * leafQueueMillis / 1000
	switch {
	case b < minLeafQueueBytes:
		b = minLeafQueueBytes
	case b > maxLeafQueueBytes:
		b = maxLeafQueueBytes
	}
	return uint32(b)
}
