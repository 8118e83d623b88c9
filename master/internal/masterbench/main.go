// Command masterbench measures the master at scale: N simulated agents (in-
// process fakes of the agent side of masterlink: simAgent, no containers,
// no checkpoint) and M simulated frameworks (the scheduler SDK) against one
// real master over gRPC — a `brim master` process (-brim) so that its RSS
// is its own, or an in-process one. It prints offers/s, task launches/s,
// the master's allocation cycle p50/p99 (from /state) and its RSS, and, as
// the baseline measured in the same run, the bare allocator's cycle on the
// same cluster shape (the master's cycle ÷ the allocator's is the cost of
// the master around the allocator).
//
// -brim self runs the master as `brim master` assembles it (server.Start
// with a state dir) in a child process of this binary, so that its RSS is
// its own, and serves the child's heap profile and memory statistics:
// where the master's memory goes, without the simulated agents' share.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	httppprof "net/http/pprof"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/brimnode/brim/master"
	"github.com/brimnode/brim/master/allocator"
	"github.com/brimnode/brim/master/server"
	"github.com/brimnode/brim/master/transport"
	"github.com/brimnode/brim/masterlink"
	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
	"github.com/brimnode/brim/resources"
	"github.com/brimnode/brim/scheduler"
	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

func main() {
	var (
		brim               string
		agents, frameworks int
		duration, taskLife time.Duration
		heartbeat          time.Duration
		agentsPerConn      int
		allocationInterval time.Duration
	)
	flag.StringVar(&brim, "brim", "", "brim binary to run the master with (empty: in-process master)")
	flag.IntVar(&agents, "agents", 1000, "simulated agents")
	flag.IntVar(&frameworks, "frameworks", 10, "simulated frameworks")
	flag.DurationVar(&duration, "duration", 10*time.Second, "measurement time after every agent registered")
	flag.DurationVar(&taskLife, "task-life", 200*time.Millisecond, "how long a simulated task runs")
	flag.DurationVar(&heartbeat, "heartbeat", 15*time.Second, "agents' heartbeat interval")
	flag.IntVar(&agentsPerConn, "agents-per-conn", 250, "simulated agents sharing one gRPC connection")
	flag.DurationVar(&allocationInterval, "allocation-interval", time.Second, "the master's allocation interval")
	flag.StringVar(&memProfile, "memprofile", "", "write a heap profile here after the measurement (-brim \"\" or -brim self)")
	var serve string
	flag.StringVar(&serve, "serve", "", "internal (-brim self): run only the master: grpc-address,debug-address,state-dir")
	flag.Parse()
	if serve != "" {
		if err := serveMaster(serve, heartbeat, allocationInterval); err != nil {
			fmt.Fprintln(os.Stderr, "masterbench -serve:", err)
			os.Exit(1)
		}
		return
	}
	if memProfile != "" && brim != "" && brim != "self" {
		fmt.Fprintln(os.Stderr, "masterbench: -memprofile needs the master in this binary (-brim \"\" or -brim self)")
		os.Exit(2)
	}
	if err := run(brim, agents, frameworks, duration, taskLife, heartbeat, agentsPerConn, allocationInterval); err != nil {
		fmt.Fprintln(os.Stderr, "masterbench:", err)
		os.Exit(1)
	}
}

// memProfile is where -memprofile writes the heap profile.
var memProfile string

const agentResources = "cpus:16;mem:65536"
const taskResources = "cpus:1;mem:2048"

func run(brim string, nAgents, nFrameworks int, duration, taskLife, heartbeat time.Duration, perConn int, interval time.Duration) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, pid, stop, err := startMaster(ctx, brim, heartbeat, interval)
	if err != nil {
		return err
	}
	defer stop()

	// Agents.
	var conns []*grpc.ClientConn
	defer func() {
		for _, c := range conns {
			_ = c.Close() // a benchmark tearing down
		}
	}()
	var wg sync.WaitGroup
	// Stop the simulated agents and frameworks before the master.
	defer func() { cancel(); wg.Wait() }()
	registered := make(chan struct{}, nAgents)
	start := time.Now()
	var stats counters
	for i := 0; i < nAgents; i++ {
		if i%perConn == 0 {
			cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				return err
			}
			conns = append(conns, cc)
		}
		a := &simAgent{id: fmt.Sprintf("sim-%06d", i), taskLife: taskLife, stats: &stats}
		api := pb.NewAgentLinkClient(conns[len(conns)-1])
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := a.run(ctx, api, heartbeat, registered); ctx.Err() == nil {
				fmt.Fprintln(os.Stderr, "simulated agent:", err)
			}
		}()
	}
	for i := 0; i < nAgents; i++ {
		select {
		case <-registered:
		case <-time.After(5 * time.Minute):
			return fmt.Errorf("only %d of %d agents registered", i, nAgents)
		}
	}
	regTime := time.Since(start)
	// The master's footprint for the agents alone, before any framework
	// adds tasks and offers (issue 16's "RSS at 50,000 agents").
	regRSS := rssMiB(pid)

	// Frameworks.
	for i := 0; i < nFrameworks; i++ {
		d, err := scheduler.New(scheduler.Options{Master: addr, Name: fmt.Sprintf("simfw-%d", i), Roles: []string{fmt.Sprintf("role-%d", i%10)}})
		if err != nil {
			return err
		}
		defer func() { _ = d.Close() }() // a benchmark tearing down
		want := resources.MustParse(taskResources)
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = d.Run(ctx, scheduler.Callbacks{
				Offers: func(ctx context.Context, offers []*pb.Offer) {
					stats.offers.Add(int64(len(offers)))
					for _, o := range offers {
						have, err := resources.Parse(o.Resources)
						if err != nil {
							continue
						}
						var tasks []*pb.TaskInfo
						for len(tasks) < 8 && have.Contains(want) {
							tasks = append(tasks, &pb.TaskInfo{TaskId: "t" + strings.ReplaceAll(uuid.NewString(), "-", "")[:20], Resources: taskResources, Command: []string{"true"}})
							have = have.Subtract(want)
						}
						if len(tasks) == 0 {
							_ = d.Decline(ctx, []string{o.Id}, 1)
							continue
						}
						if err := d.Launch(ctx, []string{o.Id}, tasks, 1); err == nil {
							stats.launched.Add(int64(len(tasks)))
						} else {
							stats.launchErrors.Add(1)
						}
					}
				},
				Update: func(context.Context, *pb.TaskStatus) { stats.updates.Add(1) },
			})
		}()
	}
	// Measure over duration.
	o0, l0, u0 := stats.offers.Load(), stats.launched.Load(), stats.updates.Load()
	cpu0 := cpuSeconds(pid)
	t0 := time.Now()
	time.Sleep(duration)
	el := time.Since(t0).Seconds()
	cpu := cpuSeconds(pid) - cpu0
	nLaunched, nUpdates := stats.launched.Load()-l0, stats.updates.Load()-u0
	offers, launches := float64(stats.offers.Load()-o0)/el, float64(nLaunched)/el
	st, err := getState()
	if err != nil {
		return err
	}
	rss := rssMiB(pid)
	if err := reportMemory(pid); err != nil {
		return err
	}
	base := allocatorBaseline(nAgents, nFrameworks)
	p99 := st.Cycles["p99Ms"]
	fmt.Printf("agents=%d: master RSS after registration, before any framework: %s\n", nAgents, regRSS)
	fmt.Printf("agents=%d frameworks=%d: registration %.1fs (%.0f agents/s); offers/s %.0f; task launches/s %.0f (launch errors %d); status updates %d\n",
		nAgents, nFrameworks, regTime.Seconds(), float64(nAgents)/regTime.Seconds(), offers, launches, stats.launchErrors.Load(), stats.updates.Load())
	fmt.Printf("agents=%d frameworks=%d: master cycle p50 %.1f ms p99 %.1f ms over %d cycles (target p99 <= 1000 ms: %s); master RSS %s (target <= 2048 MiB)\n",
		nAgents, nFrameworks, st.Cycles["p50Ms"], p99, int(st.Cycles["count"]), verdict(p99 <= 1000), rss)
	if pid != os.Getpid() && nLaunched > 0 {
		// CPU per unit of work holds on a loaded machine, where the
		// rates above are the scheduler's share.
		fmt.Printf("agents=%d frameworks=%d: master CPU %.1f s over %.0f s for %d task launches and %d status updates: %.0f µs per launch or update\n",
			nAgents, nFrameworks, cpu, el, nLaunched, nUpdates, 1e6*cpu/float64(nLaunched+nUpdates))
	}
	fmt.Printf("agents=%d frameworks=%d: baseline: bare allocator full cycle (every agent idle) %.1f ms; master cycle p99 / that = %.2fx\n",
		nAgents, nFrameworks, base, p99/base)
	return nil
}

// memStats is what the master's process reports of its memory after a GC.
type memStats struct {
	HeapInuse, StackInuse, OtherSys uint64 // bytes
	HeapKept                        uint64 // bytes: free heap not returned to the OS
	Goroutines                      int
}

// readMemStats collects garbage gcs times first: each collection halves
// the stacks of goroutines that use less than a quarter of theirs.
func readMemStats(gcs int) memStats {
	for i := 0; i < gcs; i++ {
		runtime.GC()
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return memStats{HeapInuse: ms.HeapInuse, StackInuse: ms.StackInuse, OtherSys: ms.Sys - ms.HeapSys - ms.StackSys,
		HeapKept: ms.HeapIdle - ms.HeapReleased, Goroutines: runtime.NumGoroutine()}
}

// reportMemory prints the memory statistics of the master's process and
// writes its heap profile to memProfile (the master in this process, or
// the child of -brim self); it does nothing for a `brim master`.
func reportMemory(pid int) error {
	if pid != os.Getpid() && debugAddr == "" {
		return nil
	}
	where := "master process"
	if pid == os.Getpid() {
		where = "in-process (master and simulated agents)"
	}
	// After one collection, then after four more (a master collects at
	// least every 2 minutes).
	for _, gcs := range []int{1, 4} {
		ms, err := memStatsOf(pid, gcs)
		if err != nil {
			return err
		}
		fmt.Printf("%s memory after %d GCs: heap in use %d MiB, stacks %d MiB (%d goroutines), free heap not returned %d MiB, other runtime %d MiB; RSS %s\n",
			where, gcs, ms.HeapInuse>>20, ms.StackInuse>>20, ms.Goroutines, ms.HeapKept>>20, ms.OtherSys>>20, rssMiB(pid))
	}
	if memProfile == "" {
		return nil
	}
	if pid == os.Getpid() {
		return writeHeapProfile(memProfile)
	}
	resp, err := http.Get("http://" + debugAddr + "/debug/pprof/heap?gc=1")
	if err != nil {
		return fmt.Errorf("heap profile: %w", err)
	}
	defer resp.Body.Close()
	f, err := os.Create(memProfile)
	if err != nil {
		return fmt.Errorf("heap profile: %w", err)
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		_ = f.Close() // already failing
		return fmt.Errorf("heap profile %s: %w", memProfile, err)
	}
	return f.Close()
}

// memStatsOf returns the memory statistics of the master in process pid
// (this one or the -brim self child) after gcs collections.
func memStatsOf(pid, gcs int) (memStats, error) {
	if pid == os.Getpid() {
		return readMemStats(gcs), nil
	}
	var ms memStats
	resp, err := http.Get(fmt.Sprintf("http://%s/memstats?gcs=%d", debugAddr, gcs))
	if err != nil {
		return ms, fmt.Errorf("master memory statistics: %w", err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&ms); err != nil {
		return ms, fmt.Errorf("master memory statistics: %w", err)
	}
	return ms, nil
}

// writeHeapProfile writes the live heap after a GC, as `go tool pprof`
// reads it (-sample_index=inuse_space).
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("heap profile: %w", err)
	}
	runtime.GC()
	if err := pprof.WriteHeapProfile(f); err != nil {
		_ = f.Close() // already failing
		return fmt.Errorf("heap profile %s: %w", path, err)
	}
	return f.Close()
}

// serveMaster is the child of -brim self: the master as `brim master`
// assembles it, its pprof handlers and /memstats on the debug address,
// until SIGTERM.
func serveMaster(spec string, heartbeat, interval time.Duration) error {
	f := strings.Split(spec, ",")
	if len(f) != 3 {
		return fmt.Errorf("-serve %q: want grpc-address,debug-address,state-dir", spec)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	r, err := server.Start(ctx, server.Config{
		Options: master.Options{HeartbeatInterval: heartbeat, AllocationInterval: interval},
		Listen:  f[0], StateDir: f[2],
	})
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", httppprof.Index)
	mux.HandleFunc("/memstats", func(w http.ResponseWriter, r *http.Request) {
		gcs, _ := strconv.Atoi(r.URL.Query().Get("gcs")) // none: 0
		_ = json.NewEncoder(w).Encode(readMemStats(gcs)) // a benchmark's probe
	})
	hs := &http.Server{Addr: f[1], Handler: mux}
	go func() { _ = hs.ListenAndServe() }()
	defer func() { _ = hs.Close() }() // the probe server dies with the child
	return r.Wait()
}

// debugAddr serves the -brim self child's pprof and /memstats.
var debugAddr string

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}

type counters struct {
	offers, launched, launchErrors, updates atomic.Int64
	tasks                                   atomic.Int64
}

// simAgent is a simulated agent: the agent side of masterlink with no
// containers and no checkpoint. It registers, sends heartbeats, and
// answers RunTask with STARTING, RUNNING, then FINISHED after taskLife.
// Status updates are sent once (no retry): the master's acknowledgement
// path is exercised, not the agent's retry.
type simAgent struct {
	id       string
	taskLife time.Duration
	stats    *counters
	mu       sync.Mutex
	stream   pb.AgentLink_ConnectClient
}

func (a *simAgent) send(m *pb.AgentMessage) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.stream.Send(m)
}

func (a *simAgent) status(task string, s pb.TaskState) {
	_ = a.send(&pb.AgentMessage{Msg: &pb.AgentMessage_Status{Status: &pb.TaskStatus{TaskId: task, AgentId: a.id, State: s,
		Uuid: uuid.NewString(), TimestampUnixNano: time.Now().UnixNano()}}})
}

func (a *simAgent) run(ctx context.Context, api pb.AgentLinkClient, heartbeat time.Duration, registered chan<- struct{}) error {
	stream, err := api.Connect(ctx)
	if err != nil {
		return err
	}
	a.stream = stream
	if err := a.send(&pb.AgentMessage{Msg: &pb.AgentMessage_Register{Register: &pb.Register{AgentId: a.id, Hostname: a.id, Resources: agentResources}}}); err != nil {
		return err
	}
	if _, err := stream.Recv(); err != nil {
		return err
	}
	registered <- struct{}{}
	go masterlink.Heartbeats(ctx, a.send, heartbeat)
	for {
		m, err := stream.Recv()
		if err != nil {
			return err
		}
		switch x := m.Msg.(type) {
		case *pb.MasterMessage_Run:
			id := x.Run.GetTask().GetTaskId()
			a.stats.tasks.Add(1)
			a.status(id, pb.TaskState_TASK_STARTING)
			a.status(id, pb.TaskState_TASK_RUNNING)
			time.AfterFunc(a.taskLife, func() { a.status(id, pb.TaskState_TASK_FINISHED) })
		case *pb.MasterMessage_Kill:
			a.status(x.Kill.TaskId, pb.TaskState_TASK_KILLED)
		}
	}
}

// startMaster runs `brim master` (or an in-process master) on a free port.
func startMaster(ctx context.Context, brim string, heartbeat, interval time.Duration) (addr string, pid int, stop func(), err error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", 0, nil, err
	}
	addr = l.Addr().String()
	if brim == "" {
		m, err := master.New(master.Options{HeartbeatInterval: heartbeat, AllocationInterval: interval})
		if err != nil {
			return "", 0, nil, err
		}
		api := transport.New(m, transport.Options{})
		srv := grpc.NewServer()
		api.RegisterGRPC(srv)
		hs := &http.Server{Handler: api.Handler()}
		// gRPC and HTTP on two ports in-process; the state port is +0.
		go func() { _ = srv.Serve(l) }()
		hl, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", 0, nil, err
		}
		stateAddr = hl.Addr().String()
		go func() { _ = hs.Serve(hl) }()
		mctx, cancel := context.WithCancel(ctx)
		go func() { _ = m.Run(mctx) }()
		return addr, os.Getpid(), func() { cancel(); srv.Stop(); _ = hs.Close() }, nil
	}
	l.Close()
	dir, err := os.MkdirTemp("", "masterbench")
	if err != nil {
		return "", 0, nil, err
	}
	cmd := exec.Command(brim, "master", "--listen", addr, "--state-dir", filepath.Join(dir, "state"),
		"--heartbeat-interval", heartbeat.String(), "--allocation-interval", interval.String(), "--log-level", "warn")
	if brim == "self" {
		dl, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", 0, nil, err
		}
		debugAddr = dl.Addr().String()
		dl.Close()
		cmd = exec.Command(os.Args[0], "-serve", addr+","+debugAddr+","+filepath.Join(dir, "state"),
			"-heartbeat", heartbeat.String(), "-allocation-interval", interval.String())
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return "", 0, nil, err
	}
	stop = func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		_ = os.RemoveAll(dir) // a temp dir; leftovers are harmless
	}
	stateAddr = addr
	for i := 0; ; i++ {
		if resp, err := http.Get("http://" + addr + "/state"); err == nil {
			resp.Body.Close()
			break
		}
		if i > 200 {
			stop()
			return "", 0, nil, fmt.Errorf("brim master did not start")
		}
		time.Sleep(50 * time.Millisecond)
	}
	return addr, cmd.Process.Pid, stop, nil
}

// stateAddr is where GET /state is served.
var stateAddr string

func getState() (*master.State, error) {
	resp, err := http.Get("http://" + stateAddr + "/state")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var st master.State
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return nil, err
	}
	return &st, nil
}

// cpuSeconds is the user and system CPU time process pid used so far
// (/proc/PID/stat), 0 when it cannot be read.
func cpuSeconds(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command's closing parenthesis: state is the
	// 3rd field of the line, utime and stime the 14th and 15th.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100 // USER_HZ: 100 on Linux
}

func rssMiB(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return "?"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			f := strings.Fields(l)
			if kb, err := strconv.Atoi(f[1]); err == nil {
				s := fmt.Sprintf("%.0f MiB", float64(kb)/1024)
				if pid == os.Getpid() {
					s += " (in-process: includes the simulated agents)"
				}
				return s
			}
		}
	}
	return "?"
}

// allocatorBaseline times the bare allocator's cycle on the same shape:
// every agent idle, every framework wanting everything.
func allocatorBaseline(nAgents, nFrameworks int) float64 {
	a, err := allocator.New(allocator.Options{Seed: 1})
	if err != nil {
		return 0
	}
	total := resources.MustParse(agentResources)
	for i := 0; i < nAgents; i++ {
		_ = a.AddAgent(allocator.AgentInfo{ID: fmt.Sprintf("sim-%06d", i), Total: total}, nil)
	}
	for i := 0; i < nFrameworks; i++ {
		_ = a.AddFramework(allocator.FrameworkInfo{ID: fmt.Sprintf("fw-%d", i), Roles: []string{fmt.Sprintf("role-%d", i%10)}}, nil)
	}
	const rounds = 5
	var best time.Duration
	zero := time.Duration(0)
	for r := 0; r < rounds; r++ {
		runtime.GC()
		t := time.Now()
		offers := a.Allocate()
		d := time.Since(t)
		if r == 0 || d < best {
			best = d
		}
		for _, o := range offers {
			_ = a.RecoverRole(o.FrameworkID, o.Role, o.AgentID, o.Resources, &zero)
		}
	}
	return best.Seconds() * 1000
}
