package agentserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/brimnode/brim/agent"
	"github.com/brimnode/brim/agent/agentpb"
	"github.com/brimnode/brim/internal/speclimit"
	"github.com/brimnode/brim/isolator"
	"github.com/brimnode/brim/qos"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// handshakeTimeout bounds a new connection's HTTP/2 handshake.
const handshakeTimeout = 5 * time.Second

// shutdownGrace bounds how long in-flight API calls may finish on shutdown.
const shutdownGrace = 5 * time.Second

// Run starts a and serves its local API on the unix socket at
// socketPath until ctx ends, then shuts a down without killing any
// container and closes it (see Serve). Errors wrap
// agent.ErrAgentRunning when another agent serves the socket.
func Run(ctx context.Context, a Agent, socketPath string, opts Options) error {
	l, err := Listen(socketPath)
	if err != nil {
		_ = a.Close() // failing with err; Close only releases the state dir
		return err
	}
	return Serve(ctx, a, l, opts)
}

// Serve is Run on a listener the caller opened (with Listen, before
// creating anything, so that a second agent fails without side effects).
// It starts a (recovery, the agent's loops: Agent.Start) before it
// answers, and closes l and a when it returns. Errors wrap
// agent.ErrInvalidArgument for negative limits in opts.
func Serve(ctx context.Context, a Agent, l net.Listener, opts Options) error {
	defer func() { _ = a.Close() }() // Serve's error is the one to report; Close releases the lock
	log := opts.log()
	socketPath := l.Addr().String()
	if err := opts.check(); err != nil {
		l.Close()
		return err
	}
	if err := a.Start(ctx); err != nil {
		l.Close()
		return err
	}
	srv := grpc.NewServer(opts.serverOptions()...)
	agentpb.RegisterAgentServer(srv, New(a))
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(limitConns(l, opts.MaxConns, log)) }()
	log.Info("agent serving", "id", a.ID(), "socket", socketPath, "resources", a.Info().Total)

	select {
	case err := <-errc:
		return fmt.Errorf("serve %s: %w", socketPath, err)
	case <-ctx.Done():
	}
	log.Info("agent shutting down; containers keep running")
	a.Shutdown() // ends Wait and Logs calls and the exit watchers
	stopped := make(chan struct{})
	go func() { srv.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(shutdownGrace):
		srv.Stop()
		<-stopped
	}
	// Serve may not have started when the context ended (then it returns
	// at once): close the listener, which removes the socket, and wait
	// for the Serve goroutine, so that nothing is left when we return.
	l.Close()
	if err := <-errc; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		log.Debug("local API server ended", "err", err)
	}
	return nil
}

// serverOptions are the local API server's limits. A client that connects
// and never speaks must not hold up shutdown (ConnectionTimeout); one
// that connected and has no call in progress is sent away after
// Options.IdleTimeout (a stream in progress is not idle). Every
// message is bounded below speclimit.MaxMsgBytes (specs by
// speclimit.Check, listings by paging): the limits are stated, not
// relied on.
func (o Options) serverOptions() []grpc.ServerOption {
	opts := []grpc.ServerOption{grpc.ConnectionTimeout(handshakeTimeout),
		grpc.MaxRecvMsgSize(speclimit.MaxMsgBytes), grpc.MaxSendMsgSize(speclimit.MaxMsgBytes)}
	if d := o.IdleTimeout; d > 0 {
		opts = append(opts, grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: d}))
	}
	return opts
}

// New returns the gRPC service of a (register it with
// agentpb.RegisterAgentServer).
func New(a Agent) agentpb.AgentServer { return &server{a: a} }

type server struct {
	agentpb.UnimplementedAgentServer
	a Agent
}

// toStatus picks the gRPC code for an agent error; the message stays the
// error's text, which names the problem.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	code := codes.Internal
	if c, ok := imageCode(err); ok {
		return status.Error(c, err.Error())
	}
	switch {
	case errors.Is(err, agent.ErrNotFound):
		code = codes.NotFound
	case errors.Is(err, agent.ErrNameInUse), errors.Is(err, isolator.ErrPortInUse):
		code = codes.AlreadyExists
	case errors.Is(err, agent.ErrInvalidArgument), errors.Is(err, agent.ErrCommandNotFound), errors.Is(err, isolator.ErrBadPort):
		code = codes.InvalidArgument
	case errors.Is(err, agent.ErrInsufficientResources):
		code = codes.ResourceExhausted
	case errors.Is(err, agent.ErrNotRunning), errors.Is(err, agent.ErrRunning), errors.Is(err, agent.ErrNotSupported),
		errors.Is(err, agent.ErrPaused), errors.Is(err, agent.ErrNotPaused), errors.Is(err, agent.ErrTaskContainer):
		code = codes.FailedPrecondition
	case errors.Is(err, agent.ErrRootNotAllowed), errors.Is(err, agent.ErrPrivileges):
		code = codes.PermissionDenied
	case errors.Is(err, context.Canceled):
		code = codes.Canceled
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, agent.ErrStillExiting):
		code = codes.DeadlineExceeded
	}
	return status.Error(code, err.Error())
}

func (s *server) Run(ctx context.Context, r *agentpb.RunRequest) (*agentpb.Container, error) {
	ports, err := portsFromProto(r.Ports)
	if err != nil {
		return nil, toStatus(fmt.Errorf("run: %w", err))
	}
	mode, err := cpuModeFromProto(r.CpuLimitMode)
	if err != nil {
		return nil, toStatus(fmt.Errorf("run: %w", err))
	}
	c, err := s.a.Launch(ctx, agent.Spec{
		Name: r.Name, Command: r.Command, Env: r.Env, Cwd: r.Cwd, Rootfs: r.Rootfs, User: r.User, UserNS: r.Userns,
		Resources: agent.Resources{MilliCPUs: r.MilliCpus, MemMiB: r.MemMib, NetMbit: r.NetBwMbit, DiskMiB: r.DiskMib},
		Pids:      r.Pids, CPUQuota: r.CpuQuota, CPUMode: mode, Revocable: r.Revocable, Labels: r.Labels,
		Network: r.Network, Ports: ports, LogMaxSize: r.LogMaxSizeBytes, LogMaxFiles: int(r.LogMaxFiles),
		Image: r.Image, Pull: agent.PullPolicy(r.Pull), ReadWrite: r.ReadWrite,
		Stdin: r.Stdin, Tty: r.Tty, TtySize: termSize(r.Size),
	})
	if err != nil {
		return nil, toStatus(err)
	}
	return s.proto(c), nil
}

// Paging of List (see ListRequest).
const (
	defaultListPage = 100
	maxListPage     = 1000
)

// List answers one page of the containers in creation order, bounded by
// count and by speclimit.PageBytes. Its token names the last container
// returned (creation time and ID), so a page follows from where the last
// ended even when containers came or went in between.
func (s *server) List(_ context.Context, r *agentpb.ListRequest) (*agentpb.ListResponse, error) {
	size := int(r.GetPageSize())
	switch {
	case size < 0:
		return nil, status.Errorf(codes.InvalidArgument, "list: page size %d: must not be negative", size)
	case size == 0:
		size = defaultListPage
	case size > maxListPage:
		size = maxListPage
	}
	all := s.a.List()
	if tok := r.GetPageToken(); tok != "" {
		at, id, err := parseListToken(tok)
		if err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "list: %v", err)
		}
		// The first container after (at, id) in List's order.
		i := sort.Search(len(all), func(i int) bool {
			c := all[i]
			return c.CreatedAt.UnixNano() > at || (c.CreatedAt.UnixNano() == at && c.ID > id)
		})
		all = all[i:]
	}
	n := speclimit.PageLen(all, func(c *agent.Container) int { return proto.Size(ToProto(c)) }, speclimit.PageBytes, size)
	out := &agentpb.ListResponse{Containers: make([]*agentpb.Container, n)}
	for i, c := range all[:n] {
		out.Containers[i] = s.proto(c)
	}
	if n < len(all) {
		last := all[n-1]
		out.NextPageToken = fmt.Sprintf("%d/%s", last.CreatedAt.UnixNano(), last.ID)
	}
	return out, nil
}

// parseListToken reads a token of List.
func parseListToken(tok string) (int64, string, error) {
	at, id, ok := strings.Cut(tok, "/")
	n, err := strconv.ParseInt(at, 10, 64)
	if !ok || err != nil || id == "" {
		return 0, "", fmt.Errorf("page token %q: not one of this agent's", tok)
	}
	return n, id, nil
}

func (s *server) Get(_ context.Context, r *agentpb.GetRequest) (*agentpb.Container, error) {
	c, err := s.a.Get(r.Id)
	if err != nil {
		return nil, toStatus(err)
	}
	return s.proto(c), nil
}

func (s *server) Stats(ctx context.Context, r *agentpb.StatsRequest) (*agentpb.Statistics, error) {
	c, st, err := s.a.Stats(ctx, r.Id)
	if err != nil {
		return nil, toStatus(err)
	}
	p := statsToProto(c, st)
	if sig, err := s.a.SchedSignals(c.ID); err == nil {
		schedToProto(p, sig)
	}
	return p, nil
}

func (s *server) Update(ctx context.Context, r *agentpb.UpdateRequest) (*agentpb.Container, error) {
	mode, err := cpuModeFromProto(r.CpuLimitMode)
	if err != nil {
		return nil, toStatus(fmt.Errorf("update: %w", err))
	}
	c, err := s.a.Resize(ctx, r.Id, agent.Update{MilliCPUs: r.MilliCpus, MemMiB: r.MemMib, Pids: r.Pids, NetMbit: r.NetBwMbit, CPUMode: mode})
	if err != nil {
		return nil, toStatus(err)
	}
	return s.proto(c), nil
}

func (s *server) Kill(ctx context.Context, r *agentpb.KillRequest) (*agentpb.Container, error) {
	c, err := s.a.Kill(ctx, r.Id, time.Duration(r.GraceNanos))
	if err != nil {
		return nil, toStatus(err)
	}
	return s.proto(c), nil
}

func (s *server) Wait(ctx context.Context, r *agentpb.WaitRequest) (*agentpb.Container, error) {
	c, err := s.a.Wait(ctx, r.Id)
	if err != nil {
		if s.a.Context().Err() != nil {
			return nil, status.Error(codes.Unavailable, err.Error())
		}
		return nil, toStatus(err)
	}
	return s.proto(c), nil
}

func (s *server) Logs(r *agentpb.LogsRequest, stream agentpb.Agent_LogsServer) error {
	opts, err := logsOptions(r)
	if err != nil {
		return toStatus(err)
	}
	err = s.a.Logs(stream.Context(), r.Id, opts, func(which int, data []byte) error {
		ch := &agentpb.LogChunk{Stream: agentpb.LogChunk_STDOUT, Data: data}
		if which == agent.Stderr {
			ch.Stream = agentpb.LogChunk_STDERR
		}
		return stream.Send(ch)
	})
	if err != nil && s.a.Context().Err() != nil {
		return status.Error(codes.Unavailable, err.Error())
	}
	return toStatus(err)
}

// logsOptions converts a LogsRequest; errors wrap agent.ErrInvalidArgument.
func logsOptions(r *agentpb.LogsRequest) (agent.LogsOptions, error) {
	o := agent.LogsOptions{Follow: r.Follow, Timestamps: r.Timestamps, Since: fromUnixNano(r.SinceUnixNano), Until: fromUnixNano(r.UntilUnixNano)}
	switch r.Stream {
	case "":
	case "stdout":
		o.Stream = agent.Stdout
	case "stderr":
		o.Stream = agent.Stderr
	default:
		return o, fmt.Errorf("logs %s: %w: stream %q: want stdout or stderr", r.Id, agent.ErrInvalidArgument, r.Stream)
	}
	switch {
	case r.Tail > 0:
		o.Tail = int(r.Tail)
	case r.Tail < 0:
		o.FromEnd = true
	}
	return o, nil
}

func fromUnixNano(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

func (s *server) Destroy(ctx context.Context, r *agentpb.DestroyRequest) (*agentpb.DestroyResponse, error) {
	if err := s.a.Destroy(ctx, r.Id, r.Force); err != nil {
		return nil, toStatus(err)
	}
	return &agentpb.DestroyResponse{}, nil
}

func (s *server) AgentInfo(context.Context, *agentpb.AgentInfoRequest) (*agentpb.AgentInfoResponse, error) {
	in := s.a.Info()
	out := &agentpb.AgentInfoResponse{
		Id: in.ID, Version: in.Version, StateDir: in.StateDir, CgroupParent: in.CgroupParent,
		ResourcesTotal: in.Total.String(), ResourcesUsed: in.Used.String(), ResourcesFree: in.Free.String(),
		ContainersRunning: int32(in.Running), ContainersExited: int32(in.Exited),
		StartedAtUnixNano: in.StartedAt.UnixNano(),
		StateDirFull:      in.Checkpoint.Full, CheckpointUnsaved: int32(in.Checkpoint.Unsaved), CheckpointError: in.Checkpoint.Err,
		LogMaxSizeBytes: in.LogMaxSize, LogMaxFiles: int32(in.LogMaxFiles), CpuLimitMode: string(in.CPUMode),
	}
	out.ImageCacheBytes, out.ImageCacheMaxBytes = in.ImageCache.Bytes, in.ImageCache.MaxBytes
	for _, q := range in.Quarantined {
		out.Quarantined = append(out.Quarantined, &agentpb.QuarantinedRecord{Id: q.ID, File: q.File, Error: q.Err, Container: q.Container})
	}
	if w := in.Warm; w != nil {
		out.WarmSandboxesOff = w.Off
		out.WarmSandboxesReady, out.WarmSandboxesFilling = int32(w.Ready), int32(w.Filling)
		out.WarmSandboxesMemoryBytes, out.LaunchesWarm, out.LaunchesCold = w.MemoryBytes, int64(w.Warm), int64(w.Cold)
	}
	if o := in.Oversub; o != nil {
		out.Estimator, out.QosController, out.RunqueueSource = o.Estimator, o.QoS, o.RunQueueSource
		out.RevocableTotal, out.RevocableUsed, out.RevocableFree = o.Pool.String(), o.Used.String(), o.Free.String()
		out.CorrectionsActive = int32(len(o.Active))
	}
	return out, nil
}

func (s *server) Explain(context.Context, *agentpb.ExplainRequest) (*agentpb.ExplainResponse, error) {
	o, ok := s.a.Oversubscription()
	if !ok {
		return &agentpb.ExplainResponse{}, nil
	}
	out := &agentpb.ExplainResponse{
		Enabled: true, Current: estimateToProto(o.Current), Blocking: o.Blocking,
		RevocableTotal: o.Pool.String(), RevocableUsed: o.Used.String(), RevocableFree: o.Free.String(),
		QosController: o.QoS, RunqueueSource: o.RunQueueSource,
	}
	if o.HasForwarded {
		out.Forwarded = estimateToProto(o.Forwarded)
	}
	for _, c := range o.Active {
		out.Active = append(out.Active, correctionToProto(c))
	}
	for _, c := range o.Recent {
		p := correctionToProto(c.Correction)
		p.AtUnixNano = unixNano(c.At)
		if c.Err != nil {
			p.Error = c.Err.Error()
		}
		out.Recent = append(out.Recent, p)
	}
	return out, nil
}

func (s *server) ReportLatency(_ context.Context, r *agentpb.ReportLatencyRequest) (*agentpb.ReportLatencyResponse, error) {
	err := s.a.ReportLatency(r.Id, agent.LatencyReport{
		P50: time.Duration(r.P50Nanos), P99: time.Duration(r.P99Nanos), P999: time.Duration(r.P999Nanos),
	})
	if err != nil {
		return nil, toStatus(err)
	}
	return &agentpb.ReportLatencyResponse{}, nil
}

func (s *server) Pause(ctx context.Context, r *agentpb.PauseRequest) (*agentpb.Container, error) {
	c, err := s.a.Pause(ctx, r.Id)
	if err != nil {
		return nil, toStatus(err)
	}
	return s.proto(c), nil
}

func (s *server) Unpause(ctx context.Context, r *agentpb.PauseRequest) (*agentpb.Container, error) {
	c, err := s.a.Unpause(ctx, r.Id)
	if err != nil {
		return nil, toStatus(err)
	}
	return s.proto(c), nil
}

func (s *server) Restart(ctx context.Context, r *agentpb.RestartRequest) (*agentpb.Container, error) {
	c, err := s.a.Restart(ctx, r.Id, time.Duration(r.GraceNanos))
	if err != nil {
		return nil, toStatus(err)
	}
	return s.proto(c), nil
}

func (s *server) Top(ctx context.Context, r *agentpb.TopRequest) (*agentpb.TopResponse, error) {
	ps, err := s.a.Top(ctx, r.Id)
	if err != nil {
		return nil, toStatus(err)
	}
	out := &agentpb.TopResponse{Processes: make([]*agentpb.Process, len(ps))}
	for i, p := range ps {
		out.Processes[i] = &agentpb.Process{Pid: int32(p.Pid), Ppid: int32(p.PPid), Uid: p.UID, User: p.User,
			CpuNanos: int64(p.CPU), State: p.State, Args: p.Args, Comm: p.Comm}
	}
	return out, nil
}

// cpuModeFromProto reads a request's cpu_limit_mode ("" stays "").
func cpuModeFromProto(s string) (isolator.CPUMode, error) {
	if s == "" {
		return "", nil
	}
	m, err := isolator.ParseCPUMode(s)
	if err != nil {
		return "", fmt.Errorf("%w: %w", agent.ErrInvalidArgument, err)
	}
	return m, nil
}

// proto is ToProto with what only the running agent knows: whether a QoS
// freeze holds the container.
func (s *server) proto(c *agent.Container) *agentpb.Container {
	p := ToProto(c)
	p.QosFrozen = c.State == agent.StateRunning && s.a.QoSFrozen(c.ID)
	return p
}

func estimateToProto(e agent.Estimate) *agentpb.Estimate {
	p := &agentpb.Estimate{
		Estimator: e.Explanation.Estimator, Summary: e.Explanation.Summary,
		Revocable: e.Revocable.String(), ComputedAtUnixNano: unixNano(e.At),
	}
	for _, t := range e.Explanation.Terms {
		p.Terms = append(p.Terms, &agentpb.Term{Name: t.Name, Value: t.Value, Unit: t.Unit, Note: t.Note})
	}
	return p
}

func correctionToProto(c qos.Correction) *agentpb.Correction {
	return &agentpb.Correction{
		Type: c.Type.String(), ContainerId: c.ContainerID, CpuQuotaMilli: c.CPUQuota, Reason: c.Reason,
		Trigger: &agentpb.Trigger{
			Signal: c.Trigger.Signal, Victim: c.Trigger.Victim, Value: c.Trigger.Value,
			Baseline: c.Trigger.Baseline, Threshold: c.Trigger.Threshold,
		},
	}
}

func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// ToProto converts a container record to its wire form.
func ToProto(c *agent.Container) *agentpb.Container {
	p := &agentpb.Container{
		Id: c.ID, Name: c.Name, State: c.State, Pid: int32(c.Pid), Command: c.Command, Rootfs: c.Rootfs, User: c.User, Userns: c.UserNS,
		MilliCpus: c.Limits.MilliCPUs, MemMib: c.Limits.MemoryBytes >> 20, Pids: c.Limits.Pids,
		Revocable: c.Revocable, CpuQuota: c.Limits.CPUQuota,
		CreatedAtUnixNano: unixNano(c.CreatedAt), StartedAtUnixNano: unixNano(c.StartedAt),
		SandboxDir: c.SandboxDir, Labels: c.Labels, Quarantine: c.Quarantine, Address: c.Address,
		LogMaxSizeBytes: c.LogMaxSize, LogMaxFiles: int32(c.LogMaxFiles), Stdin: c.Stdin, Tty: c.Tty,
		Image: c.Image, ImageId: c.ImageID, ImageDigest: c.ImageDigest, ExposedPorts: c.ExposedPorts,
		ReadWrite: c.ReadWrite, DiskMib: c.DiskMiB,
		CpuLimitMode: string(c.Limits.CPUMode()), Paused: c.Paused, RestartCount: int32(c.Restarts),
	}
	if c.Limits.Network {
		p.NetMbit = c.Limits.NetBandwidthMbit
		p.Ports = PortsToProto(c.Limits.Ports)
	}
	if c.Exit != nil {
		p.Exit = &agentpb.ExitStatus{
			Code: int32(c.Exit.Code), Signal: int32(c.Exit.Signal), OomKilled: c.Exit.OOMKilled,
			Reason: string(c.Exit.Reason), Message: c.Exit.Message, FinishedAtUnixNano: unixNano(c.Exit.FinishedAt),
		}
	}
	return p
}

func statsToProto(c *agent.Container, st *isolator.Statistics) *agentpb.Statistics {
	ts := st.Timestamp
	if ts.IsZero() {
		ts = time.Now()
	}
	return &agentpb.Statistics{
		Id: c.ID, Name: c.Name, TimestampUnixNano: ts.UnixNano(), MilliCpus: c.Limits.MilliCPUs,
		CpuUsageNanos: st.CPUUsageNanos, CpuUserSeconds: st.CPUUserSeconds, CpuSystemSeconds: st.CPUSystemSeconds,
		CpuLimit: st.CPULimit, CpuPeriods: st.CPUPeriods, CpuThrottled: st.CPUThrottled,
		CpuThrottledNanos: int64(st.CPUThrottledTime),
		MemUsageBytes:     st.MemUsageBytes, MemLimitBytes: st.MemLimitBytes, MemRssBytes: st.MemRSSBytes,
		MemCacheBytes: st.MemCacheBytes, MemWorkingSetBytes: st.MemWorkingSet, MemMaxUsageBytes: st.MemMaxUsage,
		MemOomKills: st.MemOOMKills, Pids: st.Pids, PidsLimit: st.PidsLimit,
		HasNet: st.HasNet, NetRxBytes: st.NetRxBytes, NetRxPackets: st.NetRxPackets, NetRxDropped: st.NetRxDropped,
		NetTxBytes: st.NetTxBytes, NetTxPackets: st.NetTxPackets, NetTxDropped: st.NetTxDropped,
	}
}

// schedToProto sets the scheduler-signal fields of p from sig.
func schedToProto(p *agentpb.Statistics, sig agent.SchedSignals) {
	p.MonitorSampleUnixNano = unixNano(sig.Sampled)
	p.MonitorCpuUsageNanos = sig.CPUUsageNanos
	if sig.HasOnCPU {
		p.HasOnCpu, p.OnCpuNanos = true, int64(sig.OnCPU)
	}
	if rq := sig.RunQueue; rq != nil {
		p.HasRunqueue, p.RunqueueSource = true, rq.Source
		p.RunqueueP50Nanos, p.RunqueueP99Nanos, p.RunqueueP999Nanos = int64(rq.P50), int64(rq.P99), int64(rq.P999)
		p.RunqueueMeasuredUnixNano = unixNano(rq.Measured)
	}
}
