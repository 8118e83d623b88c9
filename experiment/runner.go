//go:build linux

package experiment

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/brimnode/brim/agent/agentclient"
	"github.com/brimnode/brim/agent/agentpb"
	"github.com/brimnode/brim/internal/atomicfile"
	"github.com/brimnode/brim/internal/cgtree"
	"github.com/brimnode/brim/qos"
)

// gateFIFO is the named pipe each antagonist blocks on until the onset:
// the antagonists are launched before the solo phase, each blocked in
// open(2) on a FIFO it made in its sandbox — asleep, using no cpu, io or
// memory, so no controller sees it as active — and released together by
// one write each, so the onset is one instant and no launch lands in a
// measured phase.
const gateFIFO = ".brim-experiment-gate"

// sandboxDir is where a container sees its sandbox: the agent's contract
// with every task (executor.SandboxMountPoint, which a test holds equal;
// experiment reaches agents over their API and links no shim code).
const sandboxDir = "/mnt/sandbox"

// gateScript runs the antagonist's command ("$@") once the gate opens;
// it exits 97 if it cannot make the gate (never starting early).
// A read that ends without a line (someone opened and closed the pipe)
// waits again.
var gateScript = fmt.Sprintf(`g=%s/%s; mkfifo "$g" || exit 97; until read -r _ < "$g"; do :; done; exec "$@"`, sandboxDir, gateFIFO)

// ErrResultsExist is wrapped by Run when Out already holds something.
var ErrResultsExist = errors.New("results directory in use")

// Runner runs a Spec: every trial of every controller, each with a fresh
// agent, recording into Out (see record.go), then writes the tables and
// plots (Report).
type Runner struct {
	Spec *Spec
	// Out is the results directory (created; must be empty or absent).
	Out string
	// Brim is the brim binary the agents run.
	Brim string
	// Work is where the runs' temporary state lives (default /var/tmp):
	// not /tmp, which containers see as their own tmpfs.
	Work string
	Log  *slog.Logger
	// Progress receives one line per phase (may be nil).
	Progress io.Writer
}

// Run runs the experiment and writes its report. Everything a run made
// (containers, agent, cgroup parent, mounts, temp dir) is removed when
// the run ends, also on error or when ctx is cancelled.
func (r *Runner) Run(ctx context.Context) error {
	if err := os.MkdirAll(r.Out, 0o755); err != nil {
		return fmt.Errorf("results directory: %w", err)
	}
	if entries, err := os.ReadDir(r.Out); err != nil {
		return fmt.Errorf("results directory: %w", err)
	} else if len(entries) > 0 {
		return fmt.Errorf("%w: %s is not empty: choose a new one (results are never overwritten)", ErrResultsExist, r.Out)
	}
	if r.Work == "" {
		r.Work = "/var/tmp"
	}
	spec, err := json.MarshalIndent(r.Spec, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(filepath.Join(r.Out, "spec.json"), append(spec, '\n'), 0o644); err != nil {
		return err
	}
	id := strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
	for t := 0; t < r.Spec.Trials; t++ {
		for _, ci := range r.Spec.Order(t) {
			if err := ctx.Err(); err != nil {
				return err
			}
			c := r.Spec.Controllers[ci]
			r.progress("trial %d/%d, %s", t+1, r.Spec.Trials, c.Name)
			if err := r.runOne(ctx, id, t+1, c); err != nil {
				return fmt.Errorf("trial %d, controller %s: %w", t+1, c.Name, err)
			}
		}
	}
	return nil
}

func (r *Runner) progress(format string, args ...any) {
	if r.Progress != nil {
		fmt.Fprintf(r.Progress, "%s experiment: %s\n", time.Now().UTC().Format("15:04:05"), fmt.Sprintf(format, args...))
	}
}

// run is one trial of one controller while it runs.
type run struct {
	r      *Runner
	spec   *Spec
	dir    string // results
	tmp    string // state dir, socket
	parent string // cgroup parent
	agent  *exec.Cmd
	exited chan struct{}
	api    *agentclient.Client
	meta   Meta
	names  map[string]string // container ID → name
	mu     sync.Mutex
}

func (r *Runner) runOne(ctx context.Context, id string, trial int, c ControllerSpec) (err error) {
	dir := filepath.Join(r.Out, runsDir, fmt.Sprintf("%02d-%s", trial, c.Name))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(r.Work, "brim-exp.")
	if err != nil {
		return err
	}
	ru := &run{r: r, spec: r.Spec, dir: dir, tmp: tmp, names: map[string]string{},
		parent: fmt.Sprintf("/brim-exp-%s-%d-%s", id, trial, c.Name),
		meta:   Meta{Trial: trial, Controller: c.Name, QoS: c.QoS, SLO: r.Spec.SLO, Started: time.Now().UTC()}}
	ru.meta.CgroupParent = ru.parent
	defer func() { err = errors.Join(err, ru.cleanup()) }()
	if err := ru.saveMeta(); err != nil { // what a failed run made, should it leave anything
		return err
	}
	return ru.execute(ctx, c)
}

// execute runs one trial of controller c on a fresh agent: the
// antagonists launched and held at their gates, the LC and its load, the
// latency tailer and the sampler, then the phases (solo, contended,
// after) and the agent's own account.
func (ru *run) execute(ctx context.Context, c ControllerSpec) error {
	if err := ru.startAgent(ctx, c); err != nil {
		return err
	}
	vars := map[string]string{"BRIM_EXP_DIR": ru.dir, "BRIM_EXP_TRIAL": strconv.Itoa(ru.meta.Trial), "BRIM_EXP_CONTROLLER": c.Name}
	// Antagonists first, held until the onset.
	held, err := ru.launchAntagonists(ctx, vars)
	if err != nil {
		return err
	}
	lc, latFile, err := ru.launchLC(ctx, vars)
	if err != nil {
		return err
	}

	bg, stopBG := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stopBG(); wg.Wait() }()
	if ru.spec.Load != nil {
		stop, err := ru.startLoad(vars)
		if err != nil {
			return err
		}
		defer stop()
	}
	tail := &tailer{path: latFile, out: filepath.Join(ru.dir, latencyFile), api: ru.api, lc: lc.Id,
		report: ru.spec.LC.Report, log: ru.r.Log, windows: make(chan struct{}, 1)}
	wg.Add(2)
	go func() { defer wg.Done(); tail.run(bg) }()
	go func() { defer wg.Done(); ru.sample(bg) }()

	if err := ru.solo(ctx, tail, held, lc.Id, latFile); err != nil {
		return err
	}
	if err := ru.contended(ctx, held, lc.Id); err != nil {
		return err
	}
	if err := ru.after(ctx); err != nil {
		return err
	}
	// The last windows and corrections, then the agent's own account.
	if err := ru.waitWindows(ctx, tail, tail.count()+1, 3*ru.spec.Sample.Duration+5*time.Second, latFile); err != nil {
		ru.r.Log.Warn("no window after the last phase", "err", err)
	}
	stopBG()
	wg.Wait()
	if err := tail.failed(); err != nil {
		return err
	}
	if ex, err := ru.api.Explain(ctx, &agentpb.ExplainRequest{}); err == nil {
		b, _ := json.MarshalIndent(agentclient.ExplainOf(ex), "", "  ")
		_ = os.WriteFile(filepath.Join(ru.dir, "explain.json"), append(b, '\n'), 0o644) // informational
	}
	return ru.saveMeta()
}

// launchAntagonists launches every antagonist's copies, each blocked at
// its gate (gateScript) until the onset.
func (ru *run) launchAntagonists(ctx context.Context, vars map[string]string) ([]*agentpb.Container, error) {
	var held []*agentpb.Container
	for _, a := range ru.spec.Antagonists {
		cmd, err := ExpandAll(a.Command, vars)
		if err != nil {
			return nil, fmt.Errorf("antagonist %s: command: %w", a.Name, err)
		}
		for i := 0; i < a.Count; i++ {
			name := fmt.Sprintf("%s-%d", a.Name, i)
			ct, err := ru.launch(ctx, &agentpb.RunRequest{Name: name, Command: append([]string{"/bin/sh", "-c", gateScript, "sh"}, cmd...),
				MilliCpus: int64(a.Cpus * 1000), MemMib: a.Mem, User: a.User, Revocable: true})
			if err != nil {
				return nil, fmt.Errorf("antagonist %s: %w", name, err)
			}
			held = append(held, ct)
		}
	}
	return held, nil
}

// launchLC launches the latency-critical task, adds its sandbox and
// address to vars and returns it with the path of its latency file.
func (ru *run) launchLC(ctx context.Context, vars map[string]string) (*agentpb.Container, string, error) {
	lcCmd, err := ExpandAll(ru.spec.LC.Command, vars)
	if err != nil {
		return nil, "", fmt.Errorf("lc: command: %w", err)
	}
	lc, err := ru.launch(ctx, &agentpb.RunRequest{Name: "lc", Command: lcCmd, MilliCpus: int64(ru.spec.LC.Cpus * 1000),
		MemMib: ru.spec.LC.Mem, User: ru.spec.LC.User, Network: ru.spec.LC.Network})
	if err != nil {
		return nil, "", fmt.Errorf("lc: %w", err)
	}
	ru.meta.LC = lc.Id
	vars["BRIM_LC_SANDBOX"] = lc.SandboxDir
	vars["BRIM_LC_ADDRESS"] = lc.Address
	latFile, err := Expand(ru.spec.LC.LatencyFile, vars)
	if err != nil {
		return nil, "", fmt.Errorf("lc.latency-file: %w", err)
	}
	return lc, latencyPath(latFile, lc.SandboxDir), nil
}

// solo is the solo phase: it starts after the LC's first window (its
// warm-up) with every antagonist at its gate, and ends with the LC
// still running.
func (ru *run) solo(ctx context.Context, tail *tailer, held []*agentpb.Container, lcID, latFile string) error {
	if err := ru.waitWindows(ctx, tail, 2, 60*time.Second, latFile); err != nil {
		return err
	}
	for _, ct := range held { // every antagonist waits at its gate
		if err := waitGate(ctx, filepath.Join(ct.SandboxDir, gateFIFO), false); err != nil {
			return fmt.Errorf("antagonist %s: %w", ct.Name, err)
		}
	}
	ru.meta.SoloStart = nowMS()
	ru.r.progress("  solo %v", ru.spec.Solo.Duration)
	if err := sleep(ctx, ru.spec.Solo.Duration); err != nil {
		return err
	}
	return ru.lcRunning(ctx, lcID, "solo")
}

// contended is the contended phase: the antagonists released at the
// onset, then (the LC still running) their cpu time and ends recorded
// and the antagonists removed.
func (ru *run) contended(ctx context.Context, held []*agentpb.Container, lcID string) error {
	ru.meta.Onset = nowMS()
	for _, ct := range held {
		if err := waitGate(ctx, filepath.Join(ct.SandboxDir, gateFIFO), true); err != nil {
			return fmt.Errorf("release antagonist %s: %w", ct.Name, err)
		}
	}
	cpu0 := ru.cpuOf(ctx, held)
	ru.r.progress("  contended %v (%d antagonists released)", ru.spec.Contended.Duration, len(held))
	if err := sleep(ctx, ru.spec.Contended.Duration); err != nil {
		return err
	}
	ru.meta.ContendedEnd = nowMS()
	cpu1 := ru.cpuOf(ctx, held)
	if err := ru.lcRunning(ctx, lcID, "contended"); err != nil {
		return err
	}
	var results []AntagonistResult
	for _, ct := range held {
		res := AntagonistResult{Name: ct.Name, ID: ct.Id, CPUSeconds: (cpu1[ct.Id] - cpu0[ct.Id]).Seconds(), HeldCPUSeconds: cpu0[ct.Id].Seconds()}
		if err := ru.endAntagonist(ctx, ct, &res); err != nil {
			return err
		}
		results = append(results, res)
	}
	return writeAntagonists(filepath.Join(ru.dir, antagonistsFile), results)
}

// endAntagonist records how antagonist ct ended in res (warning when it
// ended on its own, not preempted) and removes it.
func (ru *run) endAntagonist(ctx context.Context, ct *agentpb.Container, res *AntagonistResult) error {
	if g, err := ru.api.Get(ctx, &agentpb.GetRequest{Id: ct.Id}); err == nil {
		res.State = g.State
		if g.Exit != nil {
			res.ExitReason = g.Exit.Reason
		}
	}
	if res.State != "running" && res.ExitReason != qos.ReasonPreempted {
		ru.r.Log.Warn("an antagonist ended on its own during the contended phase: its work is missing from the run",
			"antagonist", ct.Name, "state", res.State, "reason", res.ExitReason, "logs", "agent.log, or brim container logs")
	}
	if _, err := ru.api.Destroy(ctx, &agentpb.DestroyRequest{Id: ct.Id, Force: true}); err != nil {
		return fmt.Errorf("remove antagonist %s: %w", ct.Name, ru.api.Error(err))
	}
	return nil
}

// after is the after phase, if the spec has one: the antagonists' writes
// synced first, so that they do not land in it.
func (ru *run) after(ctx context.Context) error {
	if ru.spec.After.Duration <= 0 {
		return nil
	}
	unix.Sync()
	ru.meta.AfterStart = nowMS()
	ru.r.progress("  after %v", ru.spec.After.Duration)
	if err := sleep(ctx, ru.spec.After.Duration); err != nil {
		return err
	}
	ru.meta.AfterEnd = nowMS()
	return nil
}

// saveMeta writes meta.json: at the start (the cgroup parent, the agent
// command) and again with the phase times once the run is done.
func (ru *run) saveMeta() error {
	b, err := json.MarshalIndent(ru.meta, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(ru.dir, metaFile), append(b, '\n'), 0o644)
}

// waitGate waits (at most 30 s) until an antagonist has made its gate.
// With release it then opens the gate: it opens the FIFO for writing once
// the antagonist reads it (ENXIO until then) and writes one line, so the
// read returns. Without release it only looks (opening the FIFO would wake
// the reader).
func waitGate(ctx context.Context, path string, release bool) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		var err error
		if !release {
			_, err = os.Stat(path)
			if err == nil {
				return nil
			}
		} else {
			// O_NONBLOCK: ENXIO while nobody reads yet, never a block here.
			var fd int
			fd, err = unix.Open(path, unix.O_WRONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
			if err == nil {
				_, err = unix.Write(fd, []byte("go\n"))
				_ = unix.Close(fd) // a write-only pipe end: nothing to flush
				if err != nil {
					return fmt.Errorf("open the gate %s: %w", path, err)
				}
				return nil
			}
			if !errors.Is(err, unix.ENXIO) && !errors.Is(err, unix.ENOENT) {
				return fmt.Errorf("gate %s: %w", path, err)
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not waiting at its gate %s within 30s (%v): did its container start? (brim container logs)", path, err)
		}
		if err := sleep(ctx, 20*time.Millisecond); err != nil {
			return err
		}
	}
}

// lcRunning fails the run when the LC is no longer running at the end
// of a phase: its windows would stop, and the figures mean nothing.
func (ru *run) lcRunning(ctx context.Context, id, phase string) error {
	c, err := ru.api.Get(ctx, &agentpb.GetRequest{Id: id})
	if err != nil {
		return fmt.Errorf("lc: %w", ru.api.Error(err))
	}
	if c.State == "running" {
		return nil
	}
	why := "exited"
	if e := c.Exit; e != nil {
		why = fmt.Sprintf("exited with code %d (reason %q) %s", e.Code, e.Reason, e.Message)
	}
	return fmt.Errorf("the LC %s during the %s phase", why, phase)
}

// startAgent starts this run's agent and waits until its API answers.
func (ru *run) startAgent(ctx context.Context, c ControllerSpec) error {
	sock := filepath.Join(ru.tmp, "agent.sock")
	a := ru.spec.Agent
	args := []string{"agent", "--state-dir", filepath.Join(ru.tmp, "state"), "--socket", sock,
		"--cgroup-parent", ru.parent, "--resources", a.Resources, "--kill-grace", "2s", "--qos", c.QoS}
	for _, o := range c.Opts {
		args = append(args, "--qos-opt", o)
	}
	if a.Estimator != "" {
		args = append(args, "--estimator", a.Estimator)
	}
	for _, o := range a.EstimatorOpts {
		args = append(args, "--estimator-opt", o)
	}
	if a.EstimatorInterval.Duration > 0 {
		args = append(args, "--estimator-interval", a.EstimatorInterval.String())
	}
	args = append(args, a.Args...)
	ru.meta.AgentCommand = append([]string{ru.r.Brim}, args...)
	logf, err := os.Create(filepath.Join(ru.dir, "agent.log"))
	if err != nil {
		return err
	}
	defer logf.Close() // the child has its own descriptor
	cmd := exec.Command(ru.r.Brim, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start the agent: %w", err)
	}
	ru.agent, ru.exited = cmd, make(chan struct{})
	go func() { _ = cmd.Wait(); close(ru.exited) }() // reaped; owned by cleanup
	deadline := time.Now().Add(30 * time.Second)
	for {
		if api, err := agentclient.Dial(sock, agentclient.CallTimeout(agentCallTimeout)); err == nil {
			if _, err := api.AgentInfo(ctx, &agentpb.AgentInfoRequest{}); err == nil {
				ru.api = api
				return nil
			}
			_ = api.Close() // retried
		}
		select {
		case <-ru.exited:
			b, _ := os.ReadFile(filepath.Join(ru.dir, "agent.log"))
			return fmt.Errorf("the agent exited at start: %s", lastLines(string(b), 10))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return errors.New("the agent did not answer within 30s (see agent.log)")
		}
	}
}

// agentCallTimeout bounds each call to the run's agent: a wedged agent
// fails the run (and its cleanup goes on) instead of holding it. It is
// longer than the agent's own bound on a forced destroy (its kill exit
// timeout, 30 s).
const agentCallTimeout = 90 * time.Second

// admissionWait bounds how long a revocable launch waits for the
// estimator's first estimates (ResourceExhausted until then).
const admissionWait = 30 * time.Second

func (ru *run) launch(ctx context.Context, req *agentpb.RunRequest) (*agentpb.Container, error) {
	deadline := time.Now().Add(admissionWait)
	var ct *agentpb.Container
	for {
		var err error
		ct, err = ru.api.Run(ctx, req)
		if err == nil {
			break
		}
		if !req.Revocable || status.Code(err) != codes.ResourceExhausted || time.Now().After(deadline) {
			return nil, ru.api.Error(err)
		}
		if err := sleep(ctx, 500*time.Millisecond); err != nil {
			return nil, err
		}
	}
	ru.mu.Lock()
	ru.names[ct.Id] = ct.Name
	ru.mu.Unlock()
	return ct, nil
}

// startLoad starts the load generator in its own process group; stop
// sends SIGTERM to that group (then SIGKILL after 5 s) and reaps it.
func (ru *run) startLoad(vars map[string]string) (stop func(), err error) {
	argv, err := ExpandAll(ru.spec.Load.Command, vars)
	if err != nil {
		return nil, fmt.Errorf("load.command: %w", err)
	}
	logf, err := os.Create(filepath.Join(ru.dir, "load.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close() // the child has its own descriptor
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = os.Environ()
	for k, v := range vars {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("load.command: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }() // reaped; owned by stop
	return func() {
		pgid := cmd.Process.Pid
		_ = syscall.Kill(-pgid, syscall.SIGTERM) // the group we made
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			<-done
		}
	}, nil
}

// waitWindows waits until the tailer has read n windows.
func (ru *run) waitWindows(ctx context.Context, t *tailer, n int, bound time.Duration, path string) error {
	deadline := time.After(bound)
	for t.count() < n {
		if t.failed() != nil {
			return t.failed()
		}
		select {
		case <-t.windows:
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline:
			return fmt.Errorf("the LC wrote %d window(s) to %s within %v, want %d (is lc.latency-file right? see the LC's stdout with brim container logs)", t.count(), path, bound, n)
		}
	}
	return nil
}

// cpuOf returns each container's cpu usage now (missing: 0).
func (ru *run) cpuOf(ctx context.Context, cts []*agentpb.Container) map[string]time.Duration {
	out := map[string]time.Duration{}
	for _, ct := range cts {
		if st, err := ru.api.Stats(ctx, &agentpb.StatsRequest{Id: ct.Id}); err == nil {
			out[ct.Id] = time.Duration(st.CpuUsageNanos)
		}
	}
	return out
}

// sample records the node's cpu use and the agent's corrections every
// Sample until ctx ends.
func (ru *run) sample(ctx context.Context) {
	node, err := newCSV(filepath.Join(ru.dir, nodeFile), "unix_ms", "busy")
	if err != nil {
		ru.r.Log.Error("node samples", "err", err)
		return
	}
	defer node.close()
	corr, err := newCSV(filepath.Join(ru.dir, correctionsFile), "unix_ms", "type", "container", "trigger", "value", "reason")
	if err != nil {
		ru.r.Log.Error("corrections", "err", err)
		return
	}
	defer corr.close()
	seen := map[string]bool{}
	prev, _ := readCPUStat()
	tick := time.NewTicker(ru.spec.Sample.Duration)
	defer tick.Stop()
	for {
		poll := func() {
			if cur, err := readCPUStat(); err == nil {
				if busy, ok := cur.busySince(prev); ok {
					node.write(strconv.FormatInt(nowMS(), 10), strconv.FormatFloat(busy, 'f', 4, 64))
				}
				prev = cur
			}
			ex, err := ru.api.Explain(ctx, &agentpb.ExplainRequest{})
			if err != nil {
				return
			}
			for _, c := range ex.Recent {
				key := fmt.Sprintf("%d/%s/%s", c.AtUnixNano, c.Type, c.ContainerId)
				if seen[key] || c.Error != "" {
					continue
				}
				seen[key] = true
				ru.mu.Lock()
				name := ru.names[c.ContainerId]
				ru.mu.Unlock()
				if name == "" {
					name = c.ContainerId
				}
				var trig string
				var val float64
				if c.Trigger != nil {
					trig, val = c.Trigger.Signal, c.Trigger.Value
				}
				corr.write(strconv.FormatInt(c.AtUnixNano/1e6, 10), c.Type, name, trig, strconv.FormatFloat(val, 'g', 6, 64), c.Reason)
			}
		}
		select {
		case <-ctx.Done():
			poll() // the last corrections
			return
		case <-tick.C:
			poll()
		}
	}
}

// cleanup removes everything the run made: containers, the agent (by its
// PID), the cgroup parent, mounts below the temp dir, the temp dir.
func (ru *run) cleanup() error {
	var errs []error
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if ru.api != nil {
		if l, err := ru.api.List(ctx, &agentpb.ListRequest{}); err == nil {
			for _, ct := range l.Containers {
				if _, err := ru.api.Destroy(ctx, &agentpb.DestroyRequest{Id: ct.Id, Force: true}); err != nil {
					errs = append(errs, fmt.Errorf("remove container %s: %w", ct.Name, ru.api.Error(err)))
				}
			}
		}
		_ = ru.api.Close() // done with it
	}
	if ru.agent != nil {
		_ = ru.agent.Process.Signal(syscall.SIGTERM)
		select {
		case <-ru.exited:
		case <-time.After(15 * time.Second):
			_ = ru.agent.Process.Kill()
			<-ru.exited
		}
	}
	if err := cgtree.Remove(ru.parent); err != nil {
		errs = append(errs, fmt.Errorf("cgroup parent %s: %w", ru.parent, err))
	}
	if ms, err := mountinfo.GetMounts(mountinfo.PrefixFilter(ru.tmp)); err == nil {
		for i := len(ms) - 1; i >= 0; i-- { // deepest last in mountinfo order
			_ = unix.Unmount(ms[i].Mountpoint, unix.MNT_DETACH) // what remains is reported by RemoveAll
		}
	}
	if err := os.RemoveAll(ru.tmp); err != nil {
		errs = append(errs, fmt.Errorf("temp dir: %w", err))
	}
	return errors.Join(errs...)
}

// tailer follows the LC's latency file: it copies complete lines to out
// and, with report, forwards each window to the agent (app-latency).
type tailer struct {
	path, out, lc string
	api           *agentclient.Client
	report        bool
	log           *slog.Logger
	windows       chan struct{} // a token per batch of new windows
	mu            sync.Mutex
	n             int
	err           error
}

func (t *tailer) count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.n
}

func (t *tailer) failed() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.err
}

func (t *tailer) fail(err error) {
	t.mu.Lock()
	t.err = err
	t.mu.Unlock()
	select {
	case t.windows <- struct{}{}:
	default:
	}
}

func (t *tailer) run(ctx context.Context) {
	out, err := os.Create(t.out)
	if err != nil {
		t.fail(err)
		return
	}
	defer out.Close() // lines are written whole; a failed close loses nothing read
	var (
		f       *os.File
		rd      *bufio.Reader
		partial string
		cols    *windowColumns
	)
	defer func() {
		if f != nil {
			_ = f.Close() // read only
		}
	}()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if f == nil {
			if f, err = os.Open(t.path); err == nil {
				rd = bufio.NewReader(f)
			}
		}
		for rd != nil {
			line, err := rd.ReadString('\n')
			partial += line
			if err != nil {
				break // EOF: the rest comes later
			}
			line, partial = partial, ""
			if _, err := io.WriteString(out, line); err != nil {
				t.fail(err)
				return
			}
			if cols == nil {
				c, err := parseHeader(line)
				if err != nil {
					t.fail(fmt.Errorf("%s: %w", t.path, err))
					return
				}
				cols = &c
				continue
			}
			w, err := cols.parse(line)
			if err != nil {
				t.fail(fmt.Errorf("%s: %w", t.path, err))
				return
			}
			if t.report && w.P99 > 0 {
				rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				_, err := t.api.ReportLatency(rctx, &agentpb.ReportLatencyRequest{Id: t.lc,
					P50Nanos: int64(w.P50 * 1e3), P99Nanos: int64(w.P99 * 1e3), P999Nanos: int64(w.P999 * 1e3)})
				cancel()
				if err != nil && ctx.Err() == nil {
					t.log.Warn("report-latency", "err", t.api.Error(err))
				}
			}
			t.mu.Lock()
			t.n++
			t.mu.Unlock()
			select {
			case t.windows <- struct{}{}:
			default:
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// cpuStat is the first line of /proc/stat, in clock ticks.
type cpuStat struct{ busy, total uint64 }

func readCPUStat() (cpuStat, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuStat{}, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return cpuStat{}, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	var s cpuStat
	for i := 1; i <= 8; i++ { // user nice system idle iowait irq softirq steal (guest is in user)
		v, err := strconv.ParseUint(f[i], 10, 64)
		if err != nil {
			return cpuStat{}, fmt.Errorf("/proc/stat: %w", err)
		}
		s.total += v
		if i != 4 && i != 5 {
			s.busy += v
		}
	}
	return s, nil
}

// busySince is the busy fraction of all cpus between prev and s.
func (s cpuStat) busySince(prev cpuStat) (float64, bool) {
	if s.total <= prev.total {
		return 0, false
	}
	return float64(s.busy-prev.busy) / float64(s.total-prev.total), true
}

func nowMS() int64 { return time.Now().UnixMilli() }

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
