package cgroups

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/brimnode/brim/isolator"
)

func TestParsePSI(t *testing.T) {
	in := "some avg10=1.50 avg60=0.75 avg300=0.10 total=123456\nfull avg10=0.20 avg60=0.00 avg300=0.00 total=7\n"
	p, err := ParsePSI(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := isolator.PSI{SomeAvg10: 1.5, SomeAvg60: 0.75, SomeAvg300: 0.1, SomeTotal: 123456 * time.Microsecond,
		FullAvg10: 0.2, FullTotal: 7 * time.Microsecond}
	if p != want {
		t.Errorf("ParsePSI = %+v, want %+v", p, want)
	}
	for _, bad := range []string{"other avg10=1\n", "some avg10\n", "some avg10=x\n"} {
		if _, err := ParsePSI(strings.NewReader(bad)); err == nil {
			t.Errorf("ParsePSI(%q) succeeded", bad)
		}
	}
}

func TestParseKeyValuesAndUint(t *testing.T) {
	m, err := ParseKeyValues(strings.NewReader("user 250\nsystem 75\nbad line\nneg -1\n\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(m) != 2 || m["user"] != 250 || m["system"] != 75 {
		t.Errorf("ParseKeyValues = %v", m)
	}
	for in, want := range map[string]uint64{"max\n": 0, "-1\n": 0, "42\n": 42} {
		if got, err := ParseUint([]byte(in)); err != nil || got != want {
			t.Errorf("ParseUint(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	if _, err := ParseUint([]byte("x")); err == nil {
		t.Error("ParseUint(x) succeeded")
	}
}

func TestUsageFixtureV1(t *testing.T) {
	i, err := New(Config{Root: "testdata/v1", Parent: "/brim"})
	if err != nil {
		t.Fatal(err)
	}
	if i.Version() != V1 {
		t.Fatalf("version %v, want v1", i.Version())
	}
	var st isolator.Statistics
	if err := i.Usage(context.Background(), "c1", &st); err != nil {
		t.Fatal(err)
	}
	checkFixtureStats(t, st)
	if st.CPUUserSeconds != 2.5 || st.CPUSystemSeconds != 0.75 {
		t.Errorf("cpu user/system = %v/%v, want 2.5/0.75 (USER_HZ)", st.CPUUserSeconds, st.CPUSystemSeconds)
	}
	if st.MemMaxUsage != 33554432 || st.PidsLimit != 0 {
		t.Errorf("max usage %d pids limit %d", st.MemMaxUsage, st.PidsLimit)
	}
	if err := i.Usage(context.Background(), "nope", &st); !errors.Is(err, isolator.ErrNotFound) {
		t.Errorf("Usage of unknown = %v, want ErrNotFound", err)
	}
}

func TestUsageFixtureV2(t *testing.T) {
	i, err := New(Config{Root: "testdata/v2", Parent: "/brim"})
	if err != nil {
		t.Fatal(err)
	}
	if i.Version() != V2 {
		t.Fatalf("version %v, want v2", i.Version())
	}
	if f := i.Features(); !f.CPU || !f.Memory || !f.Pids || f.CPUIdle || f.MemSwap {
		t.Errorf("features %+v", f)
	}
	var st isolator.Statistics
	if err := i.Usage(context.Background(), "c1", &st); err != nil {
		t.Fatal(err)
	}
	checkFixtureStats(t, st)
	if st.CPUUserSeconds != 2.5 || st.CPUSystemSeconds != 0.8 {
		t.Errorf("cpu user/system = %v/%v, want 2.5/0.8", st.CPUUserSeconds, st.CPUSystemSeconds)
	}
	if st.MemMaxUsage != 33554432 || st.PidsLimit != 50 {
		t.Errorf("peak %d pids limit %d", st.MemMaxUsage, st.PidsLimit)
	}
}

// checkFixtureStats checks the values both fixture trees share.
func checkFixtureStats(t *testing.T, st isolator.Statistics) {
	t.Helper()
	if !st.HasCPU || !st.HasMemory || !st.HasPids || !st.HasPressure {
		t.Errorf("has cpu/mem/pids/psi = %v/%v/%v/%v", st.HasCPU, st.HasMemory, st.HasPids, st.HasPressure)
	}
	if st.CPUUsageNanos != 3300000000 || st.CPUPeriods != 120 || st.CPUThrottled != 30 || st.CPUThrottledTime != 1500*time.Millisecond {
		t.Errorf("cpu usage %d periods %d throttled %d/%v", st.CPUUsageNanos, st.CPUPeriods, st.CPUThrottled, st.CPUThrottledTime)
	}
	if st.MemUsageBytes != 2265088 || st.MemRSSBytes != 2097152 || st.MemCacheBytes != 8192 ||
		st.MemWorkingSet != 2265088-8192 || st.MemLimitBytes != 33554432 {
		t.Errorf("memory %+v", st)
	}
	if st.MemOOMKills != 2 || !st.MemLimitHit {
		t.Errorf("oom kills %d limit hit %v", st.MemOOMKills, st.MemLimitHit)
	}
	if st.Pids != 3 {
		t.Errorf("pids %d", st.Pids)
	}
	if st.CPUPressure.SomeAvg10 != 1.5 || st.CPUPressure.SomeTotal != 123456*time.Microsecond || st.MemPressure.FullTotal != 5*time.Microsecond {
		t.Errorf("psi cpu %+v mem %+v", st.CPUPressure, st.MemPressure)
	}
	if st.Timestamp.IsZero() {
		t.Error("no timestamp")
	}
}

func TestNewConfig(t *testing.T) {
	for _, p := range []string{"brim", "/", "/brim/../x", "/brim/"} {
		if _, err := New(Config{Root: "testdata/v1", Parent: p}); !errors.Is(err, ErrInvalid) {
			t.Errorf("New(parent %q) = %v, want ErrInvalid", p, err)
		}
	}
	if _, err := New(Config{Root: t.TempDir()}); !errors.Is(err, isolator.ErrNotSupported) {
		t.Errorf("New on an empty root = %v, want ErrNotSupported", err)
	}
	i, err := New(Config{Root: "testdata/v1"})
	if err != nil {
		t.Fatal(err)
	}
	if got := i.Path("abc"); got != "/brim/abc" {
		t.Errorf("Path = %q", got)
	}
	for _, id := range []string{"", ".", "..", "a/b"} {
		if err := i.Prepare(context.Background(), id, isolator.Limits{}, nil); !errors.Is(err, ErrInvalid) {
			t.Errorf("Prepare(%q) = %v, want ErrInvalid", id, err)
		}
	}
}

// TestFeaturesBeforeParentV2: on v2, before the first Prepare makes the
// parent, Features reports the controllers the parent will get (what its
// own parent enables for children), not none.
func TestFeaturesBeforeParentV2(t *testing.T) {
	r := t.TempDir()
	for f, v := range map[string]string{
		"cgroup.controllers":                  "cpuset cpu io memory pids\n",
		"system.slice/cgroup.controllers":     "cpu io memory pids\n",
		"system.slice/cgroup.subtree_control": "cpu memory pids\n",
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(r, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(r, f), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	i, err := New(Config{Root: r, Parent: "/system.slice/brim"})
	if err != nil {
		t.Fatal(err)
	}
	if f := i.Features(); !f.CPU || !f.Memory || !f.Pids {
		t.Errorf("Features before the parent exists = %+v, want cpu, memory and pids", f)
	}
}

func TestParseOwnV2(t *testing.T) {
	for in, want := range map[string]string{
		"0::/system.slice/brim-agent.service\n":                                  "/system.slice/brim-agent.service",
		"12:memory:/user.slice\n1:name=systemd:/x\n0::/system.slice/a.service\n": "/system.slice/a.service",
		"0::/\n": "/",
	} {
		if got, err := parseOwnV2(strings.NewReader(in)); err != nil || got != want {
			t.Errorf("parseOwnV2(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := parseOwnV2(strings.NewReader("4:memory:/x\n")); !errors.Is(err, isolator.ErrNotSupported) {
		t.Errorf("no v2 line: %v, want ErrNotSupported", err)
	}
}

func TestNewDelegated(t *testing.T) {
	r := t.TempDir()
	if err := os.WriteFile(filepath.Join(r, "cgroup.controllers"), []byte("cpu memory pids\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"brim", "/a/b/brim", "/a/b/", "/other", "/"} {
		if _, err := New(Config{Root: r, Parent: "/a/b/brim", Delegated: d}); !errors.Is(err, ErrInvalid) {
			t.Errorf("Delegated %q: %v, want ErrInvalid", d, err)
		}
	}
	for _, d := range []string{"", "/a", "/a/b"} {
		if _, err := New(Config{Root: r, Parent: "/a/b/brim", Delegated: d}); err != nil {
			t.Errorf("Delegated %q: %v", d, err)
		}
	}
}
