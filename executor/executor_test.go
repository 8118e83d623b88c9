package executor

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/brimnode/brim/internal/containerlog"
	"github.com/brimnode/brim/internal/subid"
	"time"
)

func TestBundleValidate(t *testing.T) {
	good := Bundle{Version: BundleVersion, ID: "web-1.a_b+c", Args: []string{"sh"}, CgroupPath: "/brim/web-1", StateRoot: "/var/lib/brim/runc",
		Log: containerlog.Limits{MaxSize: containerlog.DefaultMaxSize, MaxFiles: containerlog.DefaultMaxFiles}}
	if err := good.Validate(); err != nil {
		t.Fatalf("valid bundle: %v", err)
	}
	for name, mutate := range map[string]func(*Bundle){
		"version":          func(b *Bundle) { b.Version = 99 },
		"empty id":         func(b *Bundle) { b.ID = "" },
		"id with slash":    func(b *Bundle) { b.ID = "a/b" },
		"id dotdot":        func(b *Bundle) { b.ID = ".." },
		"no command":       func(b *Bundle) { b.Args = nil },
		"empty argv0":      func(b *Bundle) { b.Args = []string{""} },
		"relative cgroup":  func(b *Bundle) { b.CgroupPath = "brim/x" },
		"empty cgroup":     func(b *Bundle) { b.CgroupPath = "" },
		"root cgroup":      func(b *Bundle) { b.CgroupPath = "/" },
		"relative state":   func(b *Bundle) { b.StateRoot = "runc" },
		"relative rootfs":  func(b *Bundle) { b.Rootfs = "rootfs" },
		"userns over root": func(b *Bundle) { b.UserNS = &subid.Range{Size: 65536} },
		"userns empty":     func(b *Bundle) { b.UserNS = &subid.Range{HostUID: 1000, HostGID: 1000} },
		"no log limits":    func(b *Bundle) { b.Log = containerlog.Limits{} },
		"tiny log file":    func(b *Bundle) { b.Log.MaxSize = 100 },
		"user outside userns": func(b *Bundle) {
			b.UserNS, b.UID = &subid.Range{HostUID: 100000, HostGID: 100000, Size: 1000}, 65534
		},
	} {
		b := good
		b.Args = append([]string(nil), good.Args...)
		mutate(&b)
		if err := b.Validate(); err == nil {
			t.Errorf("%s: Validate accepted %+v", name, b)
		}
	}
}

func TestBundleAndExitFiles(t *testing.T) {
	dir := t.TempDir()
	b := &Bundle{Version: BundleVersion, ID: "x", Args: []string{"true"}, Env: []string{"A=1"}, CgroupPath: "/brim/x", StateRoot: "/r"}
	if err := WriteBundle(dir, b); err != nil {
		t.Fatal(err)
	}
	got, err := ReadBundle(dir)
	if err != nil || got.ID != "x" || got.Env[0] != "A=1" {
		t.Fatalf("ReadBundle = %+v, %v", got, err)
	}
	if _, err := ReadExit(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("ReadExit before exit: %v, want fs.ErrNotExist", err)
	}
	st := &ExitStatus{Code: 137, Signal: 9, OOMKilled: true, Reason: ReasonMemoryLimit, FinishedAt: time.Unix(1700000000, 0).UTC()}
	if err := WriteExit(dir, st); err != nil {
		t.Fatal(err)
	}
	got2, err := ReadExit(dir)
	if err != nil || *got2 != *st {
		t.Fatalf("ReadExit = %+v, %v; want %+v", got2, err, st)
	}
	// exit.json keeps the format shims of protocol version 1 write (the
	// signal's name, snake_case): agents and shims of other builds read it.
	raw, err := os.ReadFile(filepath.Join(dir, ExitFile))
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"code":137,"signal":"SIGKILL","oom_killed":true,"reason":"memory-limit","finished_at":"2023-11-14T22:13:20Z"}`; string(raw) != want {
		t.Errorf("exit.json = %s, want %s", raw, want)
	}
	// Atomic writes leave no temporaries behind.
	if m, _ := filepath.Glob(filepath.Join(dir, ".*")); len(m) != 0 {
		t.Errorf("temporary files left: %v", m)
	}
}

func TestPathOf(t *testing.T) {
	if got := PathOf([]string{"A=1"}); got != defaultPath[len("PATH="):] {
		t.Errorf("default PATH = %q", got)
	}
	if got := PathOf([]string{"PATH=/x:/y"}); got != "/x:/y" {
		t.Errorf("PATH = %q", got)
	}
}

func TestReportErr(t *testing.T) {
	r := &Report{Event: EventError, Error: "exec: \"x\": executable file not found in $PATH", Kind: kindCommandNotFound}
	if err := r.Err(); !errors.Is(err, ErrCommandNotFound) {
		t.Errorf("command-not-found report: %v", err)
	}
	if err := (&Report{Event: EventError, Error: "boom"}).Err(); err == nil || errors.Is(err, ErrCommandNotFound) {
		t.Errorf("plain error report: %v", err)
	}
	if err := (&Report{Event: EventRunning}).Err(); err != nil {
		t.Errorf("running report: %v", err)
	}
	rr := NewReportReader(strings.NewReader(`{"event":"created","pid":42}` + "\n"))
	if rep, err := rr.Next(); err != nil || rep.Pid != 42 {
		t.Fatalf("Next = %+v, %v", rep, err)
	}
	if _, err := rr.Next(); err == nil {
		t.Error("Next at EOF: no error")
	}
}

// fakeShim answers every request on dir's socket with resp.
func fakeShim(t *testing.T, dir string, resp func(request) response) {
	t.Helper()
	ln, err := net.Listen("unix", filepath.Join(dir, SocketFile))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			line, err := bufio.NewReader(conn).ReadBytes('\n')
			if err == nil {
				var req request
				_ = json.Unmarshal(line, &req)
				_ = json.NewEncoder(conn).Encode(resp(req))
			}
			conn.Close()
		}
	}()
}

func TestClient(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if _, err := NewClient(dir).State(ctx); !errors.Is(err, ErrShimGone) {
		t.Fatalf("State without a shim: %v, want ErrShimGone", err)
	}
	fakeShim(t, dir, func(req request) response {
		switch {
		case req.V != ProtocolVersion:
			return response{V: ProtocolVersion, Error: "bad version"}
		case req.Op == opSignal && req.Signal == int(syscall.SIGUSR1):
			return response{V: ProtocolVersion, Error: "container has exited", ErrorKind: errKindNotRunning, State: &ShimState{Status: StatusExited}}
		case req.Op == opWait:
			return response{V: ProtocolVersion + 1}
		}
		return response{V: ProtocolVersion, State: &ShimState{ID: "x", Status: StatusRunning, Pid: 7}}
	})
	c := NewClient(dir)
	if s, err := c.State(ctx); err != nil || s.Pid != 7 || s.Status != StatusRunning {
		t.Errorf("State = %+v, %v", s, err)
	}
	if err := c.Signal(ctx, syscall.SIGUSR1); !errors.Is(err, ErrNotRunning) {
		t.Errorf("Signal to an exited container: %v, want ErrNotRunning", err)
	}
	if _, err := c.Wait(ctx); err == nil || !strings.Contains(err.Error(), "protocol version") {
		t.Errorf("Wait against another protocol version: %v", err)
	}
}

func TestClientLongPath(t *testing.T) {
	dir := filepath.Join(t.TempDir(), strings.Repeat("x", 100))
	if len(filepath.Join(dir, SocketFile)) <= maxSocketPath {
		t.Fatal("path not long enough for the test")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	short, closeDir, err := shortSocketPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", short)
	closeDir()
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		_, _ = bufio.NewReader(conn).ReadBytes('\n')
		_ = json.NewEncoder(conn).Encode(response{V: ProtocolVersion, State: &ShimState{ID: "long"}})
	}()
	if s, err := NewClient(dir).State(context.Background()); err != nil || s.ID != "long" {
		t.Fatalf("State over a long path = %+v, %v", s, err)
	}
}

// TestClientDeadline: a shim that holds its socket but never answers
// (stopped, hung) makes every bounded call return ErrShimUnresponsive once
// its deadline passes, not hang; the caller's own ctx ending is reported
// as the ctx's error, not as an unresponsive shim.
func TestClientDeadline(t *testing.T) {
	dir := t.TempDir()
	// Listening and never accepting: what a SIGSTOPped shim's socket is.
	ln, err := net.Listen("unix", filepath.Join(dir, SocketFile))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := NewClient(dir).WithTimeout(50 * time.Millisecond)
	calls := map[string]func() error{
		"State":  func() error { _, err := c.State(ctx); return err },
		"Signal": func() error { return c.Signal(ctx, syscall.SIGTERM) },
		"Kill":   func() error { _, err := c.Kill(ctx, 0); return err },
	}
	for name, call := range calls {
		err := call()
		if !errors.Is(err, ErrShimUnresponsive) || errors.Is(err, ErrShimGone) {
			t.Errorf("%s to a shim that does not answer: %v, want ErrShimUnresponsive only", name, err)
		}
		if ctx.Err() != nil {
			t.Fatalf("%s outlived the test's bound", name)
		}
	}
	// Wait has no deadline of its own: the caller's ctx ends it.
	wctx, wcancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer wcancel()
	if _, err := c.Wait(wctx); !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrShimUnresponsive) {
		t.Errorf("Wait ended by the caller's ctx: %v, want context.DeadlineExceeded", err)
	}
}

// The control protocol carries an exit as exit.json does: a shim of
// another build (an agent upgraded under running containers) reads the
// same.
func TestShimStateWire(t *testing.T) {
	at := time.Unix(1700000000, 0).UTC()
	st := ShimState{ID: "x", Status: StatusExited, Pid: 7, ShimPid: 6, StartedAt: at,
		Exit: &ExitStatus{Code: 143, Signal: 15, Reason: ReasonKilled, Message: "killed on request", FinishedAt: at}}
	b, err := json.Marshal(response{V: ProtocolVersion, State: &st})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"v":1,"state":{"id":"x","status":"exited","pid":7,"shim_pid":6,"started_at":"2023-11-14T22:13:20Z",` +
		`"exit":{"code":143,"signal":"SIGTERM","reason":"killed","message":"killed on request","finished_at":"2023-11-14T22:13:20Z"}}}`
	if string(b) != want {
		t.Fatalf("wire form\n got %s\nwant %s", b, want)
	}
	var back response
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.State == nil || back.State.Exit == nil || *back.State.Exit != *st.Exit || back.State.Pid != 7 || !back.State.StartedAt.Equal(at) {
		t.Fatalf("decoded %+v", back.State)
	}
	var running response
	if err := json.Unmarshal([]byte(`{"v":1,"state":{"id":"x","status":"running","pid":7}}`), &running); err != nil || running.State.Exit != nil {
		t.Fatalf("running state: %+v, %v", running.State, err)
	}
}
