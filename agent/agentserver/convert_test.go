package agentserver

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/brimnode/brim/agent"
	"github.com/brimnode/brim/agent/agentpb"
	"github.com/brimnode/brim/image"
	"github.com/brimnode/brim/isolator"
	"github.com/brimnode/brim/monitor"
)

// TestToStatus: the agent's and the image store's sentinels map to one
// gRPC code each, wrapped as the agent wraps them, and the message stays
// the error's text.
func TestToStatus(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want codes.Code
	}{
		{fmt.Errorf("get x: %w", agent.ErrNotFound), codes.NotFound},
		{fmt.Errorf("run: %w", agent.ErrNameInUse), codes.AlreadyExists},
		{fmt.Errorf("launch: %w", isolator.ErrPortInUse), codes.AlreadyExists},
		{fmt.Errorf("launch: 192.0.2.99 is not an address of this host: %w", isolator.ErrBadPort), codes.InvalidArgument},
		{fmt.Errorf("run: %w", agent.ErrInvalidArgument), codes.InvalidArgument},
		{fmt.Errorf("run: %w", agent.ErrCommandNotFound), codes.InvalidArgument},
		{fmt.Errorf("run: %w", agent.ErrInsufficientResources), codes.ResourceExhausted},
		{fmt.Errorf("kill: %w", agent.ErrNotRunning), codes.FailedPrecondition},
		{fmt.Errorf("rm: %w", agent.ErrRunning), codes.FailedPrecondition},
		{fmt.Errorf("top: %w", agent.ErrNotSupported), codes.FailedPrecondition},
		{fmt.Errorf("pause: %w", agent.ErrPaused), codes.FailedPrecondition},
		{fmt.Errorf("unpause: %w", agent.ErrNotPaused), codes.FailedPrecondition},
		{fmt.Errorf("restart: %w", agent.ErrTaskContainer), codes.FailedPrecondition},
		{fmt.Errorf("launch as root: %w", agent.ErrRootNotAllowed), codes.PermissionDenied},
		{fmt.Errorf("kill: %w", agent.ErrStillExiting), codes.DeadlineExceeded},
		{context.DeadlineExceeded, codes.DeadlineExceeded},
		{context.Canceled, codes.Canceled},
		{fmt.Errorf("pull: %w", image.ErrNotFound), codes.NotFound},
		{fmt.Errorf("pull: %w", image.ErrUnauthorized), codes.PermissionDenied},
		{fmt.Errorf("rmi: %w", image.ErrInUse), codes.FailedPrecondition},
		{errors.New("something else"), codes.Internal},
	} {
		st, ok := status.FromError(toStatus(tc.err))
		if !ok || st.Code() != tc.want || st.Message() != tc.err.Error() {
			t.Errorf("toStatus(%v) = %v %q, want %v with the error's text", tc.err, st.Code(), st.Message(), tc.want)
		}
	}
	if toStatus(nil) != nil {
		t.Error("toStatus(nil) is not nil")
	}
}

// TestPortsOnTheWire: port mappings convert both ways; a port beyond
// 65535 or a host address that does not parse is a bad argument.
func TestPortsOnTheWire(t *testing.T) {
	got, err := portsFromProto([]*agentpb.PortMapping{{HostPort: 8080, ContainerPort: 80}, {HostIp: "127.0.0.1", HostPort: 5353, ContainerPort: 53, Protocol: "udp"}})
	want := []isolator.PortMapping{{HostPort: 8080, ContainerPort: 80, Protocol: isolator.TCP},
		{HostIP: netip.MustParseAddr("127.0.0.1"), HostPort: 5353, ContainerPort: 53, Protocol: "udp"}}
	if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("portsFromProto = %v, %v; want %v", got, err, want)
	}
	c := &agent.Container{ID: "web", Limits: isolator.Limits{Network: true, Ports: want}}
	if p := ToProto(c).Ports; len(p) != 2 || p[0].HostPort != 8080 || p[0].ContainerPort != 80 || p[1].Protocol != "udp" || p[1].HostIp != "127.0.0.1" {
		t.Errorf("wire ports %v", p)
	}
	for _, bad := range [][]*agentpb.PortMapping{{{HostPort: 70000, ContainerPort: 80, Protocol: "tcp"}}, {{HostIp: "nowhere", HostPort: 80, ContainerPort: 80}}} {
		if _, err := portsFromProto(bad); !errors.Is(err, agent.ErrInvalidArgument) || !errors.Is(err, isolator.ErrBadPort) {
			t.Errorf("portsFromProto(%v): %v, want ErrInvalidArgument and ErrBadPort", bad, err)
		}
	}
}

// infoAgent is an agent whose Info is given; AgentInfo calls nothing
// else (any other method panics on the nil Agent it embeds).
type infoAgent struct {
	Agent
	in agent.Info
}

func (a infoAgent) Info() agent.Info { return a.in }

// TestQuarantineOnTheWire: agent info carries the records recovery could
// not read, and a container's quarantine (brim agent info, inspect).
func TestQuarantineOnTheWire(t *testing.T) {
	in := agent.Info{Quarantined: []agent.Quarantined{{ID: "bad", File: "/state/checkpoint/bad.json", Err: "parse checkpoint bad.json: x", Container: agent.StateRunning}}}
	pb, err := New(infoAgent{in: in}).AgentInfo(context.Background(), &agentpb.AgentInfoRequest{})
	if err != nil || len(pb.Quarantined) != 1 || pb.Quarantined[0].Id != "bad" || pb.Quarantined[0].File == "" ||
		pb.Quarantined[0].Error == "" || pb.Quarantined[0].Container != agent.StateRunning {
		t.Fatalf("AgentInfo quarantined = %+v, %v", pb.GetQuarantined(), err)
	}
	if p := ToProto(&agent.Container{ID: "bad", Quarantine: "parse checkpoint bad.json: x"}); p.Quarantine == "" {
		t.Fatalf("wire container %+v has no quarantine", p)
	}
}

// TestStatsCarriesSchedSignals: the monitor's scheduler signals fill the
// Stats reply's fields; without a monitor (no oversubscription) Stats
// still answers, without them.
func TestStatsCarriesSchedSignals(t *testing.T) {
	sampled := time.Now()
	var p agentpb.Statistics
	schedToProto(&p, agent.SchedSignals{Sampled: sampled, HasOnCPU: true, OnCPU: 5 * time.Second,
		RunQueue: &monitor.LatencySummary{P50: time.Millisecond, P99: 2 * time.Millisecond, P999: 3 * time.Millisecond, Source: "ebpf", Measured: sampled}})
	if !p.HasRunqueue || p.RunqueueSource != "ebpf" || p.RunqueueP50Nanos != int64(time.Millisecond) ||
		p.RunqueueP99Nanos != int64(2*time.Millisecond) || p.RunqueueP999Nanos != int64(3*time.Millisecond) ||
		!p.HasOnCpu || p.OnCpuNanos != int64(5*time.Second) || p.MonitorSampleUnixNano != sampled.UnixNano() ||
		p.RunqueueMeasuredUnixNano != sampled.UnixNano() {
		t.Fatalf("Stats = %+v", &p)
	}

	ctx := context.Background()
	plain := newAgent(t, agent.Options{Runtime: newFakeRuntime(t.TempDir())})
	if _, err := plain.Launch(ctx, agent.Spec{Name: "lc", Command: []string{"x"}, Resources: agent.Resources{MilliCPUs: 100, MemMiB: 10}}); err != nil {
		t.Fatal(err)
	}
	st, err := New(plain).Stats(ctx, &agentpb.StatsRequest{Id: "lc"})
	if err != nil {
		t.Fatal(err)
	}
	if st.HasRunqueue || st.HasOnCpu || st.MonitorSampleUnixNano != 0 || st.MemLimitBytes != 10<<20 {
		t.Fatalf("Stats without a monitor = %+v", st)
	}
}

// failingRecovery is a runtime whose recovery fails.
type failingRecovery struct{ *fakeRuntime }

var errRecover = errors.New("recover: boom")

func (failingRecovery) Recover(context.Context) ([]*agent.RuntimeInfo, error) { return nil, errRecover }

// TestServeWhenStartFails: an agent that cannot recover is not served:
// Run returns the recovery's error, Ready never closes, the socket is
// gone and the agent is closed (its state dir can be taken again).
func TestServeWhenStartFails(t *testing.T) {
	dir, sock := t.TempDir(), socketPath(t)
	a, err := agent.New(agent.Options{StateDir: dir, Runtime: failingRecovery{newFakeRuntime(t.TempDir())}, Resources: agent.Resources{MilliCPUs: 1000, MemMiB: 1024}})
	if err != nil {
		t.Fatal(err)
	}
	if err := Run(context.Background(), a, sock, Options{}); !errors.Is(err, errRecover) {
		t.Fatalf("run with a failing recovery: %v", err)
	}
	select {
	case <-a.Ready():
		t.Error("Ready closed although recovery failed")
	default: // Run has returned: Ready's state is final
	}
	if _, err := os.Lstat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket after a failed start: %v, want it removed", err)
	}
	b, err := agent.New(agent.Options{StateDir: dir, Runtime: newFakeRuntime(t.TempDir()), Resources: agent.Resources{MilliCPUs: 1000, MemMiB: 1024}})
	if err != nil {
		t.Fatalf("the state dir after a failed start: %v, want it released", err)
	}
	b.Close()

	c := newAgent(t, agent.Options{Runtime: newFakeRuntime(t.TempDir())})
	if err := Run(context.Background(), c, socketPath(t), Options{MaxConns: -1}); !errors.Is(err, agent.ErrInvalidArgument) {
		t.Errorf("run with a negative connection bound: %v, want ErrInvalidArgument", err)
	}
}
