package cgroups

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/brimnode/brim/isolator"
)

// Policy is how the isolator treats the two QoS classes beyond their
// limits, so that an oversubscribed node sheds revocable (best-effort)
// work first when memory or the disk runs short: the kernel's OOM killer
// picks best-effort processes first (oom_score_adj), global reclaim and
// the memory soft limit take their memory first, and their io weight is
// the lowest the host's io scheduler accepts.
type Policy struct {
	// GuaranteedOOMScoreAdj and BestEffortOOMScoreAdj are the
	// oom_score_adj of each class's processes, in [-1000, 1000];
	// best-effort must be higher. Set explicitly, never inherited from the
	// agent (whose own, e.g. systemd's OOMScoreAdjust=-500, would protect
	// its containers too).
	GuaranteedOOMScoreAdj, BestEffortOOMScoreAdj int
	// BestEffortMemorySoft is where a best-effort container's soft limit
	// sits, as a fraction of its memory limit, in (0, 1]: v1
	// memory.soft_limit_in_bytes (global reclaim takes memory above it
	// first), v2 memory.high (above it the kernel throttles the group's
	// allocations and reclaims from it). Guaranteed containers get none.
	BestEffortMemorySoft float64
	// GuaranteedMemoryLow is the fraction of a guaranteed container's
	// memory limit protected from reclaim on v2 (memory.low), in [0, 1];
	// best-effort containers get none. The parent's memory.low is the sum,
	// so protection reaches the containers only as far as the parent's
	// own ancestors pass it on (systemd: MemoryLow= on the unit).
	GuaranteedMemoryLow float64
}

// DefaultPolicy returns the isolator's default policy: oom_score_adj 0
// (the kernel's default) for guaranteed and 1000 (killed first) for
// best-effort containers, a best-effort soft limit at 90 % of the memory
// limit, and each guaranteed container's whole memory limit protected.
func DefaultPolicy() Policy {
	return Policy{GuaranteedOOMScoreAdj: 0, BestEffortOOMScoreAdj: 1000, BestEffortMemorySoft: 0.9, GuaranteedMemoryLow: 1}
}

// Validate checks p; errors wrap ErrInvalid.
func (p Policy) Validate() error {
	switch {
	case p.GuaranteedOOMScoreAdj < -1000 || p.GuaranteedOOMScoreAdj > 1000 || p.BestEffortOOMScoreAdj < -1000 || p.BestEffortOOMScoreAdj > 1000:
		return fmt.Errorf("oom_score_adj guaranteed %d, best-effort %d: want [-1000, 1000]: %w", p.GuaranteedOOMScoreAdj, p.BestEffortOOMScoreAdj, ErrInvalid)
	case p.BestEffortOOMScoreAdj <= p.GuaranteedOOMScoreAdj:
		return fmt.Errorf("oom_score_adj best-effort %d must be above guaranteed %d: %w", p.BestEffortOOMScoreAdj, p.GuaranteedOOMScoreAdj, ErrInvalid)
	case !(p.BestEffortMemorySoft > 0 && p.BestEffortMemorySoft <= 1):
		return fmt.Errorf("best-effort memory soft limit fraction %v: want (0, 1]: %w", p.BestEffortMemorySoft, ErrInvalid)
	case !(p.GuaranteedMemoryLow >= 0 && p.GuaranteedMemoryLow <= 1):
		return fmt.Errorf("guaranteed memory protection fraction %v: want [0, 1]: %w", p.GuaranteedMemoryLow, ErrInvalid)
	}
	return nil
}

// pageSize rounds soft limits down; the kernel rounds to pages anyway, and
// brim's record should say what the file reads back.
const pageSize = 4096

func fraction(n int64, f float64) int64 {
	v := int64(math.Floor(float64(n) * f))
	return v - v%pageSize
}

// derive fills the class-dependent fields of s (corrections untouched).
func (p Policy) derive(s Spec, ioWeightFile string) Spec {
	m := s.Limits.MemoryBytes
	s.MemorySoft, s.MemoryLow = 0, 0
	if s.Limits.Class == isolator.BestEffort {
		s.OOMScoreAdj = p.BestEffortOOMScoreAdj
		if m > 0 {
			s.MemorySoft = max(fraction(m, p.BestEffortMemorySoft), pageSize)
		}
	} else {
		s.OOMScoreAdj = p.GuaranteedOOMScoreAdj
		if m > 0 {
			s.MemoryLow = fraction(m, p.GuaranteedMemoryLow)
		}
	}
	s.IOWeight = IOWeight(ioWeightFile, s.Limits.Class)
	return s
}

// IOWeight returns the io weight of class in file: the file's default for
// guaranteed containers, its minimum for best-effort ones (0 for an
// unknown file: nothing is written).
func IOWeight(file string, class isolator.QoSClass) uint64 {
	var lo, def uint64
	switch file {
	case "blkio.weight": // CFQ: [10, 1000], default 500
		lo, def = 10, 500
	case "blkio.bfq.weight", "io.bfq.weight": // BFQ: [1, 1000], default 100
		lo, def = 1, 100
	case "io.weight": // blk-iocost: [1, 10000], default 100
		lo, def = 1, 100
	default:
		return 0
	}
	if class == isolator.BestEffort {
		return lo
	}
	return def
}

// setLow records the memory.low of group id and, on v2, writes the sum
// of every group's to the parent: a child's protection is bounded by its
// parent's, and with memory_recursiveprot a parent protecting more than
// its children claim would hand the rest to the unprotected (best-effort)
// ones.
func (i *Isolator) setLow(id string, low int64) error {
	if i.version != V2 || !i.Features().MemSoft {
		return nil
	}
	i.lowMu.Lock()
	defer i.lowMu.Unlock()
	if low > 0 {
		i.lows[id] = low
	} else {
		delete(i.lows, id)
	}
	var sum int64
	for _, v := range i.lows {
		sum += v
	}
	if sum == i.parentLow {
		return nil
	}
	if err := writeFile(filepath.Join(i.root, i.parent, "memory.low"), strconv.FormatInt(sum, 10)); err != nil {
		i.parentLow = -1
		return fmt.Errorf("set parent memory.low=%d: %w", sum, err)
	}
	i.parentLow = sum
	return nil
}

// setOOMScoreAdj writes adj to the oom_score_adj of every process in the
// group of id (processes that exit meanwhile are skipped). Processes the
// group gains later inherit it from their parent. Written with
// CAP_SYS_RESOURCE it is also each process's oom_score_adj_min, which the
// container's processes (without that capability) cannot go below.
func (i *Isolator) setOOMScoreAdj(id string, adj int) error {
	pids, err := readProcs(i.dir(i.pidsController(), i.Path(id)))
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("set oom_score_adj: %w", isolator.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("set oom_score_adj: %w", err)
	}
	v := strconv.Itoa(adj)
	for _, pid := range pids {
		err := writeFile(filepath.Join(procRoot, strconv.Itoa(pid), "oom_score_adj"), v)
		if err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("set oom_score_adj of pid %d: %w", pid, err)
		}
	}
	return nil
}

// procRoot and sysRoot are where proc and sysfs are mounted.
const (
	procRoot = "/proc"
	sysRoot  = "/sys"
)

// OOMScoreAdj reads the oom_score_adj of process pid.
func OOMScoreAdj(pid int) (int, error) {
	b, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(pid), "oom_score_adj"))
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}
