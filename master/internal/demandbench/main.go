// Command demandbench replays one simulated day of time-aware demands
// (docs/demands.md) on a simulated clock at the master's allocation
// interval, in three modes on the same trace and cluster, in one
// process: plain DRF (timing ignored: each demand's tasks queue in a DRF
// framework at its desired start), planned (the master's planner,
// package demandplan, without preemption or lending) and planned with
// preemption and lending. Untimed DRF frameworks run background work with
// heavy-tailed durations beside the demands in every mode.
//
// Agents, tasks and frameworks are simulated (a fake, to reach 1,000
// agents here); the allocator (master/allocator) and the planner
// (master/demandplan) are the code the master runs. It prints, per mode
// and seed: strict deadlines met, loose start delay p50/p99, utilization,
// work preempted, and the planner's time per submitted demand (wall and
// CPU) and per cycle. Nothing here asserts on time.
package main

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

var t0 = time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC)

// config is one run's parameters (the flags).
type config struct {
	agents, demands int
	step            time.Duration
	hours           time.Duration
	lead, looseLead time.Duration
	leadPreempt     time.Duration
	looseLeadLend   time.Duration
	reclaim, grace  time.Duration
	bgMedian, bgMax time.Duration
	bgSigma, bgLoad float64
	spread          int
	bgRoles         int
	modes           []string
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "demandbench:", err)
		os.Exit(1)
	}
}

func main() {
	var cfg config
	var seeds, modes string
	var tsv bool
	flag.IntVar(&cfg.agents, "agents", 1000, "simulated agents (cpus:32;mem:131072 each)")
	flag.IntVar(&cfg.demands, "demands", 5000, "demands over the simulated day")
	flag.StringVar(&seeds, "seeds", "1,2,3,11,23", "trace seeds, comma-separated (1-3: those the code was developed against; 11 and 23: never tuned to)")
	flag.DurationVar(&cfg.step, "step", time.Second, "allocation interval (the master's default: 1s)")
	flag.DurationVar(&cfg.hours, "length", 28*time.Hour, "simulated time (demands are submitted over the first 22h)")
	flag.DurationVar(&cfg.lead, "lead", 30*time.Minute, "hold lead, planned mode (master --demand-lead): without preemption a strict start needs its capacity freed within it")
	flag.DurationVar(&cfg.leadPreempt, "lead-preempt", 2*time.Minute, "hold lead of strict starts with preemption and lending (capacity held ahead is lent, and revocable work on it mostly lost at the start)")
	flag.DurationVar(&cfg.looseLead, "loose-lead", time.Second, "hold lead of loose starts, planned mode (1s: from the start)")
	flag.DurationVar(&cfg.looseLeadLend, "loose-lead-lend", 10*time.Minute, "hold lead of loose starts with preemption and lending (0: -lead-preempt)")
	flag.DurationVar(&cfg.reclaim, "reclaim", 15*time.Second, "lent capacity is taken back and tasks preempted this long before a start")
	flag.DurationVar(&cfg.grace, "grace", 10*time.Second, "a killed task ends this long after the kill (the agents' kill grace)")
	flag.DurationVar(&cfg.bgMedian, "bg-median", 5*time.Minute, "median duration of background tasks (lognormal)")
	flag.Float64Var(&cfg.bgSigma, "bg-sigma", 1.6, "shape σ of the background durations' lognormal")
	flag.DurationVar(&cfg.bgMax, "bg-max", 24*time.Hour, "longest background task")
	flag.Float64Var(&cfg.bgLoad, "bg-load", 0, "background load offered, a fraction of the cluster's cpus (0: an endless backlog)")
	flag.IntVar(&cfg.bgRoles, "bg-roles", 1, "roles the background frameworks are spread over (1: one role, whose share exceeds the demands'; 8: one each, as the tenants of a shared cluster)")
	flag.IntVar(&cfg.spread, "spread", 4, "a placement takes at most 1/N of an agent per demand where it can (0: best fit)")
	flag.StringVar(&modes, "modes", "drf,planned,preempt", "modes to run")
	flag.BoolVar(&tsv, "tsv", false, "print a header, then one tab-separated line per mode and seed")
	cpuprof := flag.String("cpuprofile", "", "write a CPU profile of the whole run")
	flag.Parse()
	cfg.modes = strings.Split(modes, ",")
	for _, m := range cfg.modes {
		if m != modeDRF && m != modePlanned && m != modePreempt {
			fmt.Fprintf(os.Stderr, "demandbench: -modes: %q: want drf, planned or preempt\n", m)
			os.Exit(2)
		}
	}
	var seedList []uint64
	for _, s := range strings.Split(seeds, ",") {
		n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
		if err != nil {
			fmt.Fprintf(os.Stderr, "demandbench: -seeds: %q: %v\n", s, err)
			os.Exit(2)
		}
		seedList = append(seedList, n)
	}
	if cfg.step <= 0 || cfg.lead <= 0 || cfg.leadPreempt <= 0 || cfg.agents <= 0 || cfg.demands <= 0 || cfg.bgSigma <= 0 || cfg.bgMedian <= 0 || cfg.bgLoad < 0 || cfg.bgRoles < 1 || cfg.bgRoles > fillers {
		fmt.Fprintln(os.Stderr, "demandbench: -step, -lead, -lead-preempt, -agents, -demands, -bg-median and -bg-sigma must be positive, -bg-load not negative, -bg-roles 1 to 8")
		os.Exit(2)
	}
	if cfg.looseLeadLend == 0 {
		cfg.looseLeadLend = cfg.leadPreempt
	}
	// The planner runs on this thread: its CPU time (threadCPU) does not
	// count the time other processes of a shared machine take from it,
	// which its wall time does.
	runtime.LockOSThread()
	if *cpuprof != "" {
		f, err := os.Create(*cpuprof)
		must(err)
		must(pprof.StartCPUProfile(f))
		defer pprof.StopCPUProfile()
	}
	if !tsv {
		header(cfg)
	} else {
		// util_pct is useful utilization: cpus busy less the work
		// preempted (lost); busy_pct counts every busy cpu.
		fmt.Println("mode\tstrict_met_pct\tutil_pct\tloose_delay_p50_s\tpreempted_cpu_s\tseed\tstrict_met\tstrict_total\tloose_delay_p99_s\tbusy_pct\tplan_cpu_p99_us\tpreempted_rev_cpu_s")
	}
	for _, seed := range seedList {
		tr := trace(rand.New(rand.NewPCG(seed, 3)), cfg.demands)
		var rs []result
		for _, m := range cfg.modes {
			rs = append(rs, run(cfg, m, seed, tr))
		}
		if tsv {
			for _, r := range rs {
				fmt.Printf("%s\t%.1f\t%.1f\t%.0f\t%.0f\t%d\t%d\t%d\t%.0f\t%.1f\t%d\t%.0f\n", r.mode, pctOf(r.strictMet, r.strictTotal), 100*r.goodput,
					pct(r.looseDelays, 0.5).Seconds(), r.lostCPU, r.seed, r.strictMet, r.strictTotal, pct(r.looseDelays, 0.99).Seconds(),
					100*r.util, pct(r.submitCPU, 0.99).Microseconds(), r.lostRevCPU)
			}
			continue
		}
		table(rs)
	}
}

func header(cfg config) {
	bg := background{median: cfg.bgMedian, sigma: cfg.bgSigma, maxD: cfg.bgMax}
	load := "an endless backlog (the cluster is always full)"
	if cfg.bgLoad > 0 {
		load = fmt.Sprintf("Poisson arrivals offering %.0f %% of the cpus", 100*cfg.bgLoad)
	}
	fmt.Printf("demandbench: %d agents × cpus:%d, %d demands over a simulated day, allocation interval %s, hold lead planned %s (loose %s), with preemption %s (loose %s), reclaim %s ahead, kill grace %s\n",
		cfg.agents, cpusPerAgent, cfg.demands, cfg.step, cfg.lead, cfg.looseLead, cfg.leadPreempt, cfg.looseLeadLend, cfg.reclaim, cfg.grace)
	fmt.Printf("background: %d DRF frameworks in %d role(s) of 1-cpu tasks, %s; durations lognormal, median %s, σ %.2g (p90 %s, p99 %s, %.1f %% over 1h, mean %s), cut at %s\n\n",
		fillers, cfg.bgRoles, load, cfg.bgMedian, cfg.bgSigma, bg.quantile(0.9), bg.quantile(0.99), 100*bg.shareOver(time.Hour), bg.mean().Round(time.Second), cfg.bgMax)
}

func pctOf(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return 100 * float64(a) / float64(b)
}

func table(rs []result) {
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "seed %d\t", rs[0].seed)
	for _, r := range rs {
		fmt.Fprintf(w, "%s\t", r.mode)
	}
	fmt.Fprintln(w)
	row := func(name string, f func(r result) string) {
		fmt.Fprintf(w, "%s\t", name)
		for _, r := range rs {
			fmt.Fprintf(w, "%s\t", f(r))
		}
		fmt.Fprintln(w)
	}
	row("strict deadlines met (of submitted)", func(r result) string {
		return fmt.Sprintf("%.1f %% (%d/%d)", pctOf(r.strictMet, r.strictTotal), r.strictMet, r.strictTotal)
	})
	row("strict accepted at submission", func(r result) string { return fmt.Sprintf("%d", r.strictAcc) })
	row("loose start delay p50", func(r result) string { return pct(r.looseDelays, 0.5).Round(time.Second).String() })
	row("loose start delay p99", func(r result) string { return pct(r.looseDelays, 0.99).Round(time.Second).String() })
	row("loose started", func(r result) string { return fmt.Sprintf("%d/%d", r.looseStarted, r.looseTotal) })
	row("utilization, useful (busy less preempted work, 2h-22h)", func(r result) string { return fmt.Sprintf("%.1f %%", 100*r.goodput) })
	row("  cpus busy, preempted work included", func(r result) string { return fmt.Sprintf("%.1f %%", 100*r.util) })
	row("work preempted (cpu·s, tasks)", func(r result) string { return fmt.Sprintf("%.0f, %d", r.lostCPU, r.preempted) })
	row("  of it revocable, on lent capacity", func(r result) string { return fmt.Sprintf("%.0f", r.lostRevCPU) })
	row("planner per demand, wall p50/p99", func(r result) string { return durs(r.submitWall) })
	row("planner per demand, CPU p50/p99", func(r result) string { return durs(r.submitCPU) })
	row("planner per cycle, CPU p50/p99", func(r result) string { return durs(r.cycleCPU) })
	row("simulation wall time", func(r result) string { return r.wall.Round(time.Second).String() })
	must(w.Flush())
	for _, r := range rs {
		if len(r.missed) > 0 {
			fmt.Printf("  %s: strict demands missed: %v\n", r.mode, r.missed)
		}
		if len(r.failed) > 0 {
			fmt.Printf("  %s: demands failed: %v\n", r.mode, r.failed)
		}
	}
	fmt.Println()
}

func durs(ds []time.Duration) string {
	if len(ds) == 0 {
		return "-"
	}
	return fmt.Sprintf("%s / %s", pct(ds, 0.5).Round(time.Microsecond), pct(ds, 0.99).Round(time.Microsecond))
}
