// Command launchbench measures launches of real containers end to end
// through the master (issue 35), against the same containers launched on
// the agent's local API in the same run. It starts `brim dev` (a master
// and an agent, -brim) under a cgroup parent of its own and measures:
//
//   - local: the agent's Run call (`brim container run`'s), launch to
//     "running", one at a time: p50, p99;
//   - master: ACCEPT (the framework's Launch call, the scheduler SDK) to
//     TASK_RUNNING at the framework, one task at a time: p50, p99, and
//     its p50 over the local one (goal ≤ 2);
//   - sustained: tasks of `true` launched as fast as offers allow for
//     -duration, from one framework and then from ten: TASK_RUNNING
//     updates per second (goal ≥ 50), with the ACCEPT → TASK_RUNNING p50
//     and p99 under that load; and the local API's launches per second
//     from as many clients as the ten frameworks' tasks in flight would
//     need (-local-clients);
//   - beside each sustained rate, the CPU each launch cost the node:
//     `brim dev` and every process it started (shims, containers), CPU
//     time over launches. Steadier than the rate on a shared machine: the
//     rate is the CPU the node gets divided by this.
//
// Every task is `true` with -cpus and -mem, run as the agent's default
// user on the host root (warm sandboxes serve them: the agent keeps them
// as it does by default). brim dev keeps the containers' runtime state
// (--run-dir) on a tmpfs the bench mounts for it, as a host under systemd
// has /run: this machine's /run is on its disk (-run-dir state runs
// without one). It prints the load average before and after: the
// machine may be shared, compare the ratios.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/brimnode/brim/agent/agentclient"
	"github.com/brimnode/brim/agent/agentpb"
	"github.com/brimnode/brim/internal/cgtree"
	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
	"github.com/brimnode/brim/resources"
	"github.com/brimnode/brim/scheduler"
	"golang.org/x/sys/unix"
)

type config struct {
	brim         string
	tasks        int
	duration     time.Duration
	frameworks   []int
	milliCPUs    int64
	memMiB       int64
	localClients int
	// runDir is where brim dev keeps its containers' runtime state:
	// "tmpfs" (a tmpfs of the bench's own, as /run is under systemd) or
	// "state" (the state dir: the disk of the temporary directory).
	runDir string
}

func main() {
	var cfg config
	var fws string
	flag.StringVar(&cfg.brim, "brim", "bin/brim", "brim binary (brim-shim beside it is the shim)")
	flag.IntVar(&cfg.tasks, "tasks", 50, "launches timed one at a time, locally and through the master")
	flag.DurationVar(&cfg.duration, "duration", 15*time.Second, "length of each sustained phase")
	flag.StringVar(&fws, "frameworks", "1,10", "frameworks of each sustained phase")
	flag.Int64Var(&cfg.milliCPUs, "milli-cpus", 50, "cpus of a task, in thousandths")
	flag.Int64Var(&cfg.memMiB, "mem", 16, "memory of a task, MiB")
	flag.IntVar(&cfg.localClients, "local-clients", 4, "clients of the local API's sustained phase")
	flag.StringVar(&cfg.runDir, "run-dir", "tmpfs", "brim dev's --run-dir: tmpfs (a tmpfs of the bench's own, as /run is under systemd) or state (none: the state dir's disk)")
	flag.Parse()
	if cfg.runDir != "tmpfs" && cfg.runDir != "state" {
		fmt.Fprintf(os.Stderr, "launchbench: -run-dir %q: want tmpfs or state\n", cfg.runDir)
		os.Exit(2)
	}
	for _, f := range strings.Split(fws, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "launchbench: -frameworks %q: want positive numbers\n", fws)
			os.Exit(2)
		}
		cfg.frameworks = append(cfg.frameworks, n)
	}
	if err := run(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "launchbench:", err)
		os.Exit(1)
	}
}

func run(cfg config) error {
	fmt.Printf("load average before: %s\n", loadavg())
	d, err := startDev(cfg)
	if err != nil {
		return err
	}
	defer d.stop()
	fmt.Printf("run dir (containers' runtime state): %s\n", d.runDirKind)
	api, err := agentclient.Dial(d.socket)
	if err != nil {
		return err
	}
	defer func() { _ = api.Close() }()
	ctx := context.Background()

	local, err := localLatency(ctx, api, cfg)
	if err != nil {
		return fmt.Errorf("local launches: %w", err)
	}
	viaMaster, err := masterLatency(ctx, d.addr, cfg)
	if err != nil {
		return fmt.Errorf("launches through the master: %w", err)
	}
	fmt.Printf("local API, one at a time (%d):            launch → running      p50 %7.2f ms  p99 %7.2f ms\n",
		len(local), ms(pct(local, 50)), ms(pct(local, 99)))
	fmt.Printf("through the master, one at a time (%d):   ACCEPT → TASK_RUNNING p50 %7.2f ms  p99 %7.2f ms  p50 ratio to local %.2f (goal ≤ 2)\n",
		len(viaMaster), ms(pct(viaMaster, 50)), ms(pct(viaMaster, 99)), float64(pct(viaMaster, 50))/float64(pct(local, 50)))
	cpu0, err := d.cpu()
	if err != nil {
		return err
	}
	rate, launched, err := localSustained(ctx, api, cfg)
	if err != nil {
		return fmt.Errorf("local launches: %w", err)
	}
	cpu1, err := d.cpu()
	if err != nil {
		return err
	}
	fmt.Printf("local API, sustained (%d clients, %s):    %6.1f launches/s; node CPU per launch %5.1f ms\n",
		cfg.localClients, cfg.duration, rate, ms(perLaunch(cpu1-cpu0, launched)))
	for _, n := range cfg.frameworks {
		s, err := sustained(ctx, d, cfg, n)
		if err != nil {
			return fmt.Errorf("sustained launches, %d frameworks: %w", n, err)
		}
		fmt.Printf("through the master, sustained (%2d frameworks, %s): %6.1f launches/s (goal ≥ 50); ACCEPT → TASK_RUNNING p50 %7.2f ms  p99 %7.2f ms; node CPU per launch %5.1f ms (%.2f CPUs)\n",
			n, cfg.duration, s.rate, ms(pct(s.lat, 50)), ms(pct(s.lat, 99)), ms(s.cpuPerLaunch), s.cpus)
	}
	if in, err := api.AgentInfo(ctx, &agentpb.AgentInfoRequest{}); err == nil {
		fmt.Printf("warm sandboxes: launches %d warm, %d cold\n", in.LaunchesWarm, in.LaunchesCold)
	}
	fmt.Printf("load average after: %s\n", loadavg())
	return nil
}

// dev is the `brim dev` this benchmark runs.
type dev struct {
	cmd            *exec.Cmd
	done           chan struct{}
	dir, socket    string
	addr, cgParent string
	runDir         string // the tmpfs mounted for --run-dir, "" for none
	runDirKind     string // what the output says of it
}

// startDev starts `brim dev` in a temporary state dir, under a cgroup
// parent of its own, and waits until the master and the agent answer.
func startDev(cfg config) (*dev, error) {
	dir, err := os.MkdirTemp("", "brim-launchbench-")
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	l.Close()
	d := &dev{dir: dir, socket: filepath.Join(dir, "agent.sock"), addr: addr, done: make(chan struct{}),
		cgParent: fmt.Sprintf("/brim-launchbench-%d", os.Getpid())}
	args := []string{"dev", "--state-dir", filepath.Join(dir, "dev"), "--socket", d.socket, "--listen", addr,
		"--cgroup-parent", d.cgParent, "--resources", "cpus:2;mem:4096", "--allocation-interval", "10ms",
		"--sandbox-retention", "10", "--log-level", "warn"}
	d.runDirKind = "the state dir (" + fsType(dir) + ")"
	if cfg.runDir == "tmpfs" {
		run := filepath.Join(dir, "run")
		if err := os.Mkdir(run, 0o700); err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
		if err := unix.Mount("tmpfs", run, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size=512m,mode=0700"); err != nil {
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("mount a tmpfs for the run dir: %w", err)
		}
		d.runDir, d.runDirKind = run, "a tmpfs of its own, as /run is under systemd (-run-dir state: none)"
		args = append(args, "--run-dir", run)
	}
	d.cmd = exec.Command(cfg.brim, args...)
	logf, err := os.Create(filepath.Join(dir, "dev.log"))
	if err != nil {
		return nil, err
	}
	d.cmd.Stdout, d.cmd.Stderr = logf, logf
	if err := d.cmd.Start(); err != nil {
		logf.Close()
		d.removeDir()
		return nil, err
	}
	go func() { _ = d.cmd.Wait(); logf.Close(); close(d.done) }()
	deadline := time.Now().Add(time.Minute)
	for {
		if _, err := os.Stat(d.socket); err == nil {
			if resp, err := http.Get("http://" + addr + "/state"); err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return d, nil
				}
			}
		}
		select {
		case <-d.done:
			out, _ := os.ReadFile(filepath.Join(dir, "dev.log"))
			d.stop()
			return nil, fmt.Errorf("brim dev exited: %s", out)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			d.stop()
			return nil, fmt.Errorf("brim dev did not come up within a minute")
		}
	}
}

// stop ends brim dev (SIGTERM: the agent closes its warm sandboxes; the
// tasks, `true`, have ended) and removes its state and cgroup parent.
func (d *dev) stop() {
	if d.cmd.Process != nil {
		_ = d.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-d.done:
		case <-time.After(30 * time.Second):
			_ = d.cmd.Process.Kill()
			<-d.done
		}
	}
	if err := cgtree.Remove(d.cgParent); err != nil {
		fmt.Fprintln(os.Stderr, "launchbench: remove cgroup parent:", err)
	}
	d.removeDir()
}

// removeDir removes the temporary directory, the run dir's tmpfs first.
func (d *dev) removeDir() {
	if d.runDir != "" {
		if err := unix.Unmount(d.runDir, unix.MNT_DETACH); err != nil {
			fmt.Fprintln(os.Stderr, "launchbench: unmount the run dir:", err)
			return // never remove through a mount
		}
	}
	_ = os.RemoveAll(d.dir)
}

// fsType names the file system dir is on.
func fsType(dir string) string {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return "unknown file system"
	}
	switch st.Type {
	case unix.TMPFS_MAGIC:
		return "tmpfs"
	case unix.EXT4_SUPER_MAGIC:
		return "ext4"
	case unix.XFS_SUPER_MAGIC:
		return "xfs"
	case unix.BTRFS_SUPER_MAGIC:
		return "btrfs"
	}
	return fmt.Sprintf("file system 0x%x", st.Type)
}

// localLatency times cfg.tasks Run calls, one at a time.
func localLatency(ctx context.Context, api *agentclient.Client, cfg config) ([]time.Duration, error) {
	var out []time.Duration
	for i := 0; i < cfg.tasks; i++ {
		start := time.Now()
		c, err := api.Run(ctx, runRequest(cfg))
		d := time.Since(start)
		if err != nil {
			return nil, api.Error(err)
		}
		out = append(out, d)
		if err := finish(ctx, api, c.Id); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func runRequest(cfg config) *agentpb.RunRequest {
	return &agentpb.RunRequest{Command: []string{"true"}, MilliCpus: cfg.milliCPUs, MemMib: cfg.memMiB}
}

// finish waits for container id's end and removes it.
func finish(ctx context.Context, api *agentclient.Client, id string) error {
	if _, err := api.Wait(ctx, &agentpb.WaitRequest{Id: id}); err != nil {
		return api.Error(err)
	}
	if _, err := api.Destroy(ctx, &agentpb.DestroyRequest{Id: id}); err != nil {
		return api.Error(err)
	}
	return nil
}

// localSustained runs cfg.localClients clients launching containers back
// to back for cfg.duration and returns their launches per second and
// their number.
func localSustained(ctx context.Context, api *agentclient.Client, cfg config) (float64, int64, error) {
	var n atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, cfg.localClients)
	deadline := time.Now().Add(cfg.duration)
	start := time.Now()
	for range cfg.localClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				c, err := api.Run(ctx, runRequest(cfg))
				if err != nil {
					errs <- api.Error(err)
					return
				}
				n.Add(1)
				if err := finish(ctx, api, c.Id); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	select {
	case err := <-errs:
		return 0, 0, err
	default:
	}
	return float64(n.Load()) / time.Since(start).Seconds(), n.Load(), nil
}

// framework is one scheduler-SDK framework launching tasks of `true`.
type framework struct {
	d    *scheduler.Driver
	cfg  config
	want resources.Resources
	name string
	id   string // unique: task IDs are the master's for a while after their end

	mu       sync.Mutex
	accepted map[string]time.Time // task → when its ACCEPT was sent
	lat      []time.Duration
	running  int // TASK_RUNNING updates
	inFlight int // launched, not ended
	offered  int // offers received
	errs     []string
	serial   bool
	seq      int
}

func newFramework(addr, name string, cfg config, serial bool) (*framework, error) {
	d, err := scheduler.New(scheduler.Options{Master: addr, Name: name})
	if err != nil {
		return nil, err
	}
	want, err := resources.Parse(taskResources(cfg))
	if err != nil {
		return nil, err
	}
	id := fmt.Sprintf("%s-%x", name, time.Now().UnixNano())
	return &framework{d: d, cfg: cfg, want: want, name: name, id: id, accepted: make(map[string]time.Time), serial: serial}, nil
}

func taskResources(cfg config) string {
	return fmt.Sprintf("cpus:%g;mem:%d", float64(cfg.milliCPUs)/1000, cfg.memMiB)
}

// offers launches what fits (one task at a time when serial), declines
// the rest.
func (f *framework) offers(ctx context.Context, offers []*pb.Offer) {
	for _, o := range offers {
		have, err := resources.Parse(o.Resources)
		var tasks []*pb.TaskInfo
		f.mu.Lock()
		f.offered++
		for err == nil && have.Contains(f.want) && len(tasks) < 16 && (!f.serial || f.inFlight+len(tasks) == 0) {
			f.seq++
			tasks = append(tasks, &pb.TaskInfo{TaskId: fmt.Sprintf("%s-%d", f.id, f.seq), Resources: taskResources(f.cfg), Command: []string{"true"}})
			have = have.Subtract(f.want)
		}
		f.inFlight += len(tasks)
		now := time.Now()
		for _, t := range tasks {
			f.accepted[t.TaskId] = now
		}
		f.mu.Unlock()
		if len(tasks) == 0 {
			_ = f.d.Decline(ctx, []string{o.Id}, 0)
			continue
		}
		if err := f.d.Launch(ctx, []string{o.Id}, tasks, 0); err != nil {
			f.mu.Lock()
			if len(f.errs) < 5 {
				f.errs = append(f.errs, err.Error())
			}
			f.inFlight -= len(tasks)
			for _, t := range tasks {
				delete(f.accepted, t.TaskId)
			}
			f.mu.Unlock()
		}
	}
}

// update records TASK_RUNNING's latency and a task's end.
func (f *framework) update(_ context.Context, st *pb.TaskStatus) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch st.State {
	case pb.TaskState_TASK_RUNNING:
		if t, ok := f.accepted[st.TaskId]; ok {
			f.lat = append(f.lat, time.Since(t))
			f.running++
		}
	case pb.TaskState_TASK_FINISHED, pb.TaskState_TASK_FAILED, pb.TaskState_TASK_KILLED,
		pb.TaskState_TASK_LOST, pb.TaskState_TASK_ERROR, pb.TaskState_TASK_GONE:
		if _, ok := f.accepted[st.TaskId]; ok {
			delete(f.accepted, st.TaskId)
			f.inFlight--
		}
	}
}

// fleet is frameworks running.
type fleet struct {
	fs     []*framework
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// startFrameworks starts n frameworks (serial: one task in flight each).
func startFrameworks(ctx context.Context, addr string, cfg config, n int, serial bool) (*fleet, error) {
	ctx, cancel := context.WithCancel(ctx)
	fl := &fleet{cancel: cancel}
	for i := range n {
		f, err := newFramework(addr, fmt.Sprintf("launchbench-%d-%d", n, i), cfg, serial)
		if err != nil {
			fl.stop()
			return nil, err
		}
		fl.fs = append(fl.fs, f)
		fl.wg.Add(1)
		go func() {
			defer fl.wg.Done()
			_ = f.d.Run(ctx, scheduler.Callbacks{Offers: f.offers, Update: f.update})
		}()
	}
	return fl, nil
}

// stop ends the frameworks and waits for them.
func (fl *fleet) stop() {
	fl.cancel()
	fl.wg.Wait()
	for _, f := range fl.fs {
		_ = f.d.Close()
	}
}

// running counts the TASK_RUNNING updates so far, and returns the
// latencies (ACCEPT → TASK_RUNNING) after the first skip of each
// framework's.
func (fl *fleet) running(skip []int) (int, []time.Duration, []int) {
	n := 0
	var lat []time.Duration
	var marks []int
	for i, f := range fl.fs {
		f.mu.Lock()
		n += f.running
		from := 0
		if skip != nil {
			from = skip[i]
		}
		lat = append(lat, f.lat[from:]...)
		marks = append(marks, len(f.lat))
		f.mu.Unlock()
	}
	return n, lat, marks
}

// masterLatency times cfg.tasks launches through the master, one at a
// time (a framework launches its next task once the last one ended).
func masterLatency(ctx context.Context, addr string, cfg config) ([]time.Duration, error) {
	fl, err := startFrameworks(ctx, addr, cfg, 1, true)
	if err != nil {
		return nil, err
	}
	defer fl.stop()
	deadline := time.Now().Add(time.Duration(cfg.tasks) * 5 * time.Second)
	for {
		n, lat, _ := fl.running(nil)
		if n >= cfg.tasks {
			return lat[:cfg.tasks], nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%d of %d tasks reached TASK_RUNNING", n, cfg.tasks)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

type sustainedResult struct {
	rate         float64
	lat          []time.Duration
	cpuPerLaunch time.Duration // the node's (d.cpu) over the launches
	cpus         float64       // the node's CPU over the phase's time
}

// sustained runs n frameworks launching as fast as offers allow: after a
// warm-up second (subscriptions, the warm sandboxes' K), it counts the
// TASK_RUNNING updates of cfg.duration.
func sustained(ctx context.Context, d *dev, cfg config, n int) (sustainedResult, error) {
	fl, err := startFrameworks(ctx, d.addr, cfg, n, false)
	if err != nil {
		return sustainedResult{}, err
	}
	defer fl.stop()
	time.Sleep(time.Second)
	r0, _, marks := fl.running(nil)
	cpu0, err := d.cpu()
	if err != nil {
		return sustainedResult{}, err
	}
	start := time.Now()
	time.Sleep(cfg.duration)
	r1, lat, _ := fl.running(marks)
	cpu1, err := d.cpu()
	if err != nil {
		return sustainedResult{}, err
	}
	wall := time.Since(start)
	if r1 == r0 {
		var why []string
		for _, f := range fl.fs {
			f.mu.Lock()
			why = append(why, fmt.Sprintf("%s: %d offers, launch errors %q", f.name, f.offered, f.errs))
			f.mu.Unlock()
		}
		return sustainedResult{}, fmt.Errorf("no task reached TASK_RUNNING in %s: %s", cfg.duration, strings.Join(why, "; "))
	}
	return sustainedResult{rate: float64(r1-r0) / wall.Seconds(), lat: lat,
		cpuPerLaunch: perLaunch(cpu1-cpu0, int64(r1-r0)), cpus: (cpu1 - cpu0).Seconds() / wall.Seconds()}, nil
}

func perLaunch(cpu time.Duration, n int64) time.Duration {
	if n <= 0 {
		return 0
	}
	return cpu / time.Duration(n)
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times.
const clockTicks = 100

// cpu returns the CPU time brim dev and every process it started have
// used so far: each live process's own and its waited-for children's
// (a shim's child is counted in the shim's until the shim is waited for,
// then in brim dev's). A process that ends while /proc is read may be
// counted twice or not at all: one shim's CPU in a phase's.
func (d *dev) cpu() (time.Duration, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0, fmt.Errorf("node cpu: %w", err)
	}
	ticks := map[int]int64{}
	children := map[int][]int{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // ended meanwhile
		}
		// After "pid (comm)": state, ppid, …, utime, stime, cutime, cstime
		// (fields 3, 4, 14–17 of proc(5)).
		f := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
		if len(f) < 15 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		var t int64
		for _, v := range f[11:15] {
			n, _ := strconv.ParseInt(v, 10, 64)
			t += n
		}
		ticks[pid] = t
		children[ppid] = append(children[ppid], pid)
	}
	root := d.cmd.Process.Pid
	if _, ok := ticks[root]; !ok {
		return 0, fmt.Errorf("node cpu: brim dev (pid %d) is gone", root)
	}
	var total int64
	for todo := []int{root}; len(todo) > 0; {
		pid := todo[len(todo)-1]
		todo = append(todo[:len(todo)-1], children[pid]...)
		total += ticks[pid]
	}
	return time.Duration(total) * time.Second / clockTicks, nil
}

func pct(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[(len(s)-1)*p/100]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func loadavg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(data))
	return strings.Join(f[:min(3, len(f))], " ")
}
