package cli

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"slices"
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
		{1e9, 1e12, true}, {1e10, 0, false}, // a billion cpus reach the agent, which names its total
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

// runCLI runs `brim container ARGS` and returns its exit error.
func runCLI(t *testing.T, args ...string) (ExitError, string) {
	t.Helper()
	cmd := newContainerCommand()
	var out strings.Builder
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(context.Background())
	var ee ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("%v: %v", args, err)
	}
	return ee, out.String()
}

// Usage errors say what is wrong with the value given, before any call
// (no agent listens on the socket here): update --mem 0 said "give at
// least one of …", --cpus 1e10 "must be a positive number", a long
// socket path "bind: invalid argument".
func TestUsageMessages(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "none.sock")
	long := "/" + strings.Repeat("d", 120) + "/agent.sock"
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"update", "--mem", "0", "x"}, "update: --mem 0: must be a positive number MiB"},
		{[]string{"update", "--pids", "-1", "x"}, "update: --pids -1: must be a positive number"},
		{[]string{"update", "x"}, "give at least one of --cpus, --mem, --pids, --net-bw, --cpu-limit-mode"},
		{[]string{"update", "--cpu-limit-mode", "hard", "x"}, `--cpu-limit-mode "hard": want shares, quota or both`},
		{[]string{"run", "--cpus", "1e10", "--", "true"}, "--cpus 1e+10: more than any node has (at most 1e+09)"},
		{[]string{"run", "--cpus", "0", "--", "true"}, "--cpus 0: must be a positive number"},
		{[]string{"run", "--cpu-quota", "--cpu-limit-mode", "shares", "--", "true"}, "--cpu-quota is --cpu-limit-mode both, not shares"},
		{[]string{"ls", "--socket", long}, "is 132 bytes: a unix socket's path may have at most 107"},
		{[]string{"ls", "--filter", "image=x"}, "--filter \"image=x\": want KEY=VALUE with KEY one of"},
		{[]string{"ls", "--format", "{{.Nope"}, "--format: template"},
		{[]string{"stats", "--watch", "--no-stream"}, "--watch and --no-stream: give one"},
		{[]string{"stop", "-t", "-1", "x"}, "--time -1: must not be negative"},
	} {
		args := c.args
		if !slices.Contains(args, "--socket") {
			args = append(args, "--socket", sock)
		}
		ee, _ := runCLI(t, args...)
		if ee.Code != 2 || !strings.Contains(ee.Msg, c.want) {
			t.Errorf("%v: exit %d %q, want 2 saying %q", c.args, ee.Code, ee.Msg, c.want)
		}
	}
}

func TestParseTime(t *testing.T) {
	now := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		in   string
		want time.Time
	}{
		{"10m", now.Add(-10 * time.Minute)},
		{"1h30m", now.Add(-90 * time.Minute)},
		{"0s", now},
		{"2026-11-29T07:58:21Z", time.Date(2026, 11, 29, 7, 58, 21, 0, time.UTC)},
		{"2026-11-29T07:58:21.5+01:00", time.Date(2026, 11, 29, 6, 58, 21, 5e8, time.UTC)},
		{"2026-11-29", time.Date(2026, 11, 29, 0, 0, 0, 0, time.Local)},
		{"2026-11-29T07:58:21", time.Date(2026, 11, 29, 7, 58, 21, 0, time.Local)},
		{"1764403101", time.Unix(1764403101, 0)},
		{"1764403101.25", time.Unix(1764403101, 25e7)},
	} {
		got, err := ParseTime(tc.in, now)
		if err != nil || !got.Equal(tc.want) {
			t.Errorf("ParseTime(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "yesterday", "-5m", "2026-13-01", "1.", "1.1234567891", "12:00", "-5"} {
		if got, err := ParseTime(bad, now); err == nil {
			t.Errorf("ParseTime(%q) = %v, want an error", bad, got)
		}
	}
}

// --wait and wait of a container the OOM killer ended name the cause on
// stderr beside exit 137 (it said nothing).
func TestExitForNamesOOM(t *testing.T) {
	oom := &agentpb.Container{Id: "c1", MemMib: 16, Exit: &agentpb.ExitStatus{Code: 137, Signal: 9, OomKilled: true, Reason: "memory-limit"}}
	var ee ExitError
	if err := exitFor(oom); !errors.As(err, &ee) || ee.Code != 137 ||
		ee.Msg != "container c1 was killed by the kernel's OOM killer at its memory limit (16 MiB); exit 137" {
		t.Errorf("exitFor(OOM) = %#v", err)
	}
	if err := exitFor(&agentpb.Container{Id: "c2", Exit: &agentpb.ExitStatus{Code: 137, Signal: 9, Reason: "killed"}}); !errors.As(err, &ee) || ee.Code != 137 || ee.Msg != "" {
		t.Errorf("exitFor(killed) = %#v", err)
	}
	if err := exitFor(&agentpb.Container{Id: "c3", Exit: &agentpb.ExitStatus{}}); err != nil {
		t.Errorf("exitFor(0) = %v", err)
	}
}

func TestPsTime(t *testing.T) {
	for d, want := range map[time.Duration]string{0: "00:00:00", 61 * time.Second: "00:01:01", 26*time.Hour + 3*time.Second: "1-02:00:03"} {
		if got := psTime(d); got != want {
			t.Errorf("psTime(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestLogsFilters(t *testing.T) {
	now := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
	req := &agentpb.LogsRequest{Stream: "stderr"}
	if err := logsFilters(req, "0", "1h", "10m", now); err != nil || req.Tail != -1 ||
		req.SinceUnixNano != now.Add(-time.Hour).UnixNano() || req.UntilUnixNano != now.Add(-10*time.Minute).UnixNano() {
		t.Fatalf("logsFilters: %+v, %v", req, err)
	}
	req = &agentpb.LogsRequest{}
	if err := logsFilters(req, "all", "", "", now); err != nil || req.Tail != 0 || req.SinceUnixNano != 0 {
		t.Fatalf("logsFilters(all): %+v, %v", req, err)
	}
	for _, bad := range []struct{ stream, tail, since, until, want string }{
		{"stdin", "all", "", "", "--stream"},
		{"", "-1", "", "", "--tail"},
		{"", "ten", "", "", "--tail"},
		{"", "all", "soon", "", "--since"},
		{"", "all", "", "later", "--until"},
		{"", "all", "10m", "1h", "before --since"},
	} {
		err := logsFilters(&agentpb.LogsRequest{Stream: bad.stream}, bad.tail, bad.since, bad.until, now)
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("logsFilters(%+v): %v, want an error naming %s", bad, err, bad.want)
		}
	}
}
