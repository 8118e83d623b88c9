package cli

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/status"

	"github.com/brimnode/brim/agent/agentpb"
	"github.com/brimnode/brim/internal/testutil"
)

func TestMilliCPUs(t *testing.T) {
	for _, tc := range []struct {
		in   float64
		want int64
		ok   bool
	}{
		{0.1, 100, true}, {1.5, 1500, true}, {2, 2000, true}, {0.001, 1, true},
		{0, 0, false}, {-1, 0, false}, {0.0005, 0, false}, {1.2345, 0, false},
	} {
		got, err := milliCPUs(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("milliCPUs(%v) = %d, %v", tc.in, got, err)
		}
	}
}

// wedgedLister is an agent whose List never answers.
type wedgedLister struct {
	agentpb.UnimplementedAgentServer
}

func (wedgedLister) List(ctx context.Context, _ *agentpb.ListRequest) (*agentpb.ListResponse, error) {
	<-ctx.Done()
	return nil, status.FromContextError(ctx.Err()).Err()
}

// TestContainerCommandsBoundTheirCalls: `brim container ls` against an
// agent that never answers fails (exit 1) once --timeout has passed,
// naming the bound; a negative --timeout is a usage error. Before, it
// waited until interrupted.
func TestContainerCommandsBoundTheirCalls(t *testing.T) {
	sock := testutil.ServeAgent(t, wedgedLister{})
	for _, c := range []struct {
		timeout string
		code    int
		msg     string
	}{
		{"300ms", 1, "did not answer List within 300ms"},
		{"-1s", 2, "--timeout -1s"},
	} {
		cmd := newContainerCommand()
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		cmd.SetArgs([]string{"ls", "--socket", sock, "--timeout", c.timeout})
		// The test's own bound: an unbounded call ends Canceled here.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		err := cmd.ExecuteContext(ctx)
		cancel()
		var ee ExitError
		if !errors.As(err, &ee) || ee.Code != c.code || !strings.Contains(ee.Msg, c.msg) {
			t.Errorf("container ls --timeout %s against a wedged agent: %v, want exit %d saying %q", c.timeout, err, c.code, c.msg)
		}
	}
}

func TestLogLimits(t *testing.T) {
	for _, tc := range []struct {
		size  string
		files int
		want  int64
		ok    bool
	}{
		{"", 0, 0, true}, {"10MiB", 3, 10 << 20, true}, {"64k", 1, 64 << 10, true}, {"0", 0, 0, true},
		{"1k", 0, 0, false}, {"lots", 0, 0, false}, {"", -1, 0, false}, {"", 1001, 0, false},
	} {
		got, err := logLimits(tc.size, tc.files)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("logLimits(%q, %d) = %d, %v; want %d ok=%v", tc.size, tc.files, got, err, tc.want, tc.ok)
		}
	}
}

// runRecorder is an agent that records the RunRequest it gets.
type runRecorder struct {
	agentpb.UnimplementedAgentServer
	got chan *agentpb.RunRequest
}

func (r *runRecorder) Run(_ context.Context, req *agentpb.RunRequest) (*agentpb.Container, error) {
	r.got <- req
	return &agentpb.Container{Id: "c1"}, nil
}

// TestContainerRunImageFlags: without --image no pull policy goes to the
// agent (the flag's default named one, and the agent refused every plain
// run: "a pull policy or a read-write root needs an image"); with it,
// the image, policy, read-write root and disk go; --read-write or --pull
// without an image, and no command without an image, are usage errors.
func TestContainerRunImageFlags(t *testing.T) {
	rec := &runRecorder{got: make(chan *agentpb.RunRequest, 1)}
	sock := testutil.ServeAgent(t, rec)
	run := func(args ...string) (*agentpb.RunRequest, error) {
		cmd := newContainerCommand()
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		cmd.SetArgs(append([]string{"run", "--socket", sock}, args...))
		err := cmd.ExecuteContext(context.Background())
		select {
		case r := <-rec.got:
			return r, err
		default:
			return nil, err
		}
	}
	r, err := run("--", "true")
	if err != nil || r == nil || r.Image != "" || r.Pull != "" || r.ReadWrite {
		t.Errorf("plain run: %v, %v; want no image fields", r, err)
	}
	r, err = run("--image", "app:1", "--read-write", "--disk", "64")
	if err != nil || r == nil || r.Image != "app:1" || r.Pull != "missing" || !r.ReadWrite || r.DiskMib != 64 || len(r.Command) != 0 {
		t.Errorf("image run: %v, %v", r, err)
	}
	for _, args := range [][]string{{"--read-write", "--", "true"}, {"--pull", "always", "--", "true"}, {}, {"--image", "app:1", "--disk", "-1"}} {
		_, err := run(args...)
		var ee ExitError
		if !errors.As(err, &ee) || ee.Code != 2 {
			t.Errorf("run %q: %v, want a usage error (exit 2)", args, err)
		}
	}
}
