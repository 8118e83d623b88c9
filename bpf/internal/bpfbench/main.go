//go:build linux && amd64

// Command bpfbench measures what the eBPF monitor costs, in one run:
//   - ns per sched_switch and per wakeup, from the kernel's BPF run-time
//     statistics;
//   - `perf bench sched pipe` throughput pinned to one CPU, without the
//     monitor, with it loaded while the benchmark's cgroup is untracked, and
//     while it is tracked (every switch does the full work), as ratios to the
//     baseline (alternating runs, medians);
//   - the reader: one Read of 100 tracked cgroups, as % of one core when
//     polled every second.
//
// It needs root. It creates its cgroups under /brim-bench-<hex> and removes
// them on exit. The benchmark cgroup gets a large cpu.shares so the figures
// measure the monitor rather than whatever else shares the CPU.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"syscall"
	"time"

	"crypto/rand"
	"encoding/hex"

	"github.com/brimnode/brim/bpf"
	"github.com/brimnode/brim/internal/cgtree"
	"golang.org/x/sys/unix"
)

const cpuRoot = "/sys/fs/cgroup/cpu"

func main() {
	rounds := flag.Int("rounds", 7, "alternating runs per configuration")
	loops := flag.Int("loops", 100000, "perf bench sched pipe loops per run")
	cpu := flag.Int("cpu", 1, "CPU to pin the pipe benchmark to")
	flag.Parse()
	if err := run(*rounds, *loops, *cpu); err != nil {
		fmt.Fprintln(os.Stderr, "bpfbench:", err)
		os.Exit(1)
	}
}

func run(rounds, loops, cpu int) (err error) {
	perf, err := findPerf()
	if err != nil {
		return err
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	parent := "/brim-bench-" + hex.EncodeToString(b[:])
	pipeCg := parent + "/pipe"
	if err := os.MkdirAll(filepath.Join(cpuRoot, pipeCg), 0o755); err != nil {
		return fmt.Errorf("create cgroup: %w", err)
	}
	cleanup := func() error { return cgtree.Remove(parent) }
	defer func() {
		if rerr := cleanup(); rerr != nil && err == nil {
			err = rerr
		}
	}()
	// Leave no cgroup behind: a closed stdout (| head) must not kill us
	// before the deferred cleanup, an interrupt cleans up and exits.
	signal.Ignore(syscall.SIGPIPE)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		if _, ok := <-sigs; ok {
			time.Sleep(200 * time.Millisecond) // let perf, interrupted too, exit
			_ = cleanup()
			os.Exit(130)
		}
	}()
	if err := os.WriteFile(filepath.Join(cpuRoot, pipeCg, "cpu.shares"), []byte("262144"), 0o644); err != nil {
		return fmt.Errorf("set shares: %w", err)
	}
	pipe := func() (float64, error) { return pipeOps(perf, pipeCg, cpu, loops) }
	label := fmt.Sprintf("perf bench sched pipe, CPU %d, %d loops, %d rounds (medians)", cpu, loops, rounds)
	if err := throughput(pipe, pipeCg, rounds, label); err != nil {
		return err
	}
	m, err := programCost(pipe, pipeCg)
	if err != nil {
		return err
	}
	defer func() { _ = m.Close() }() // a benchmark tearing down
	return readerCost(m, parent, pipeCg)
}

// throughput prints the pipe benchmark's throughput without the monitor,
// with it loaded while the benchmark's cgroup is untracked, and while it
// is tracked: medians of rounds alternating runs, as ratios to the
// baseline run just before (the machine is shared and its speed drifts
// between rounds). label heads the figures.
func throughput(pipe func() (float64, error), pipeCg string, rounds int, label string) error {
	var base, untracked, tracked []float64
	for r := 0; r < rounds; r++ {
		v, err := pipe()
		if err != nil {
			return err
		}
		base = append(base, v)
		u, t, err := monitored(pipe, pipeCg)
		if err != nil {
			return err
		}
		untracked, tracked = append(untracked, u), append(tracked, t)
	}
	var ru, rt []float64
	for i := range base {
		ru = append(ru, untracked[i]/base[i])
		rt = append(rt, tracked[i]/base[i])
	}
	fmt.Printf("%s: baseline %.0f ops/s\n", label, median(base))
	fmt.Printf("  monitor loaded, cgroup untracked: %.0f ops/s  ratio %.3f\n", median(untracked), median(ru))
	fmt.Printf("  monitor loaded, cgroup tracked:   %.0f ops/s  ratio %.3f  (target >= 0.90)\n", median(tracked), median(rt))
	return nil
}

// monitored runs the pipe benchmark with the monitor loaded, first with
// pipeCg untracked, then tracked; the monitor is closed before it
// returns.
func monitored(pipe func() (float64, error), pipeCg string) (untracked, tracked float64, err error) {
	m, err := bpf.Load(bpf.Options{MaxCgroups: 128})
	if err != nil {
		return 0, 0, err
	}
	untracked, err = pipe()
	if err == nil {
		if _, err = m.Track(pipeCg); err == nil {
			tracked, err = pipe()
		}
	}
	if cerr := m.Close(); cerr != nil && err == nil {
		err = cerr
	}
	return untracked, tracked, err
}

// programCost prints the cost per run of each eBPF program from the
// kernel's run-time statistics (these add two clock reads per run, so
// they are measured in a run of their own), and returns the monitor,
// pipeCg tracked; the caller closes it.
func programCost(pipe func() (float64, error), pipeCg string) (*bpf.Monitor, error) {
	m, err := bpf.Load(bpf.Options{MaxCgroups: 128, RunTimeStats: true})
	if err != nil {
		return nil, err
	}
	stats, err := trackedStats(m, pipe, pipeCg)
	if err != nil {
		_ = m.Close() // a benchmark tearing down
		return nil, err
	}
	for _, s := range stats {
		target := ""
		if s.Name == "sched_switch" {
			target = "  (target <= 150 ns)"
		}
		fmt.Printf("  %-20s %6d ns/run over %d runs%s\n", s.Name, s.PerRun().Nanoseconds(), s.RunCount, target)
	}
	return m, nil
}

// trackedStats tracks pipeCg on m, runs the pipe benchmark once and
// returns the programs' statistics.
func trackedStats(m *bpf.Monitor, pipe func() (float64, error), pipeCg string) ([]bpf.ProgramStats, error) {
	if _, err := m.Track(pipeCg); err != nil {
		return nil, err
	}
	if _, err := pipe(); err != nil {
		return nil, err
	}
	return m.Stats()
}

// readerCost prints the cost of one Read of 100 tracked cgroups (made
// under parent; pipeCg untracked first), as % of one core at 1 Hz.
func readerCost(m *bpf.Monitor, parent, pipeCg string) error {
	pipeID, err := bpf.CgroupID(filepath.Join(cpuRoot, pipeCg))
	if err != nil {
		return err
	}
	if err := m.Untrack(pipeID); err != nil {
		return err
	}
	for i := 0; i < 100; i++ {
		p := fmt.Sprintf("%s/r%03d", parent, i)
		if err := os.Mkdir(filepath.Join(cpuRoot, p), 0o755); err != nil {
			return fmt.Errorf("create cgroup: %w", err)
		}
		if _, err := m.Track(p); err != nil {
			return err
		}
	}
	dst := make(map[uint64]bpf.CgroupStats, 128)
	const reads = 2000
	cpu0, err := cpuTime()
	if err != nil {
		return err
	}
	start := time.Now()
	for i := 0; i < reads; i++ {
		if err := m.Read(dst); err != nil {
			return err
		}
	}
	wall := time.Since(start) / reads
	cpu1, err := cpuTime()
	if err != nil {
		return err
	}
	per := (cpu1 - cpu0) / reads
	fmt.Printf("reader: %d cgroups, %v CPU (%v wall) per Read = %.4f %% of one core at 1 Hz (target <= 0.1 %%)\n",
		len(dst), per, wall, 100*per.Seconds())
	return nil
}

// cpuTime returns the CPU time (user + system) this process has used.
func cpuTime() (time.Duration, error) {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("getrusage: %w", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}

var opsRe = regexp.MustCompile(`(?m)^\s*([0-9]+) ops/sec`)

// pipeOps runs perf bench sched pipe pinned to cpu inside cgroup cg.
func pipeOps(perf, cg string, cpu, loops int) (float64, error) {
	script := fmt.Sprintf(`echo $$ > %s/cgroup.procs && exec taskset -c %d %s bench sched pipe -l %d`,
		filepath.Join(cpuRoot, cg), cpu, perf, loops)
	out, err := exec.Command("sh", "-c", script).CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("perf bench sched pipe: %w: %s", err, out)
	}
	mt := opsRe.FindSubmatch(out)
	if mt == nil {
		return 0, fmt.Errorf("perf bench sched pipe: no ops/sec in %q", bytes.TrimSpace(out))
	}
	return strconv.ParseFloat(string(mt[1]), 64)
}

func findPerf() (string, error) {
	if p, err := exec.LookPath("perf"); err == nil {
		return p, nil
	}
	m, _ := filepath.Glob("/usr/bin/perf_*")
	if len(m) > 0 {
		return m[len(m)-1], nil
	}
	return "", errors.New("find perf: not installed (make deps installs linux-perf)")
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}
