package bpf

import (
	"errors"
	"github.com/brimnode/brim/internal/testutil"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestParseSchedstat(t *testing.T) {
	tests := []struct {
		in      string
		want    schedstat
		wantErr bool
	}{
		{"123 456 7\n", schedstat{123, 456, 7}, false},
		{"0 0 0", schedstat{}, false},
		{"1 2\n", schedstat{}, true},
		{"1 x 3\n", schedstat{}, true},
		{"", schedstat{}, true},
	}
	for _, tt := range tests {
		got, err := parseSchedstat([]byte(tt.in))
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("parseSchedstat(%q) = %+v, %v; want %+v, err %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestParseIDs(t *testing.T) {
	got, err := parseIDs(strings.NewReader("12\n\n345\n"))
	if err != nil || len(got) != 2 || got[0] != 12 || got[1] != 345 {
		t.Errorf("parseIDs = %v, %v", got, err)
	}
	if _, err := parseIDs(strings.NewReader("12\nabc\n")); err == nil {
		t.Errorf("parseIDs accepted a bad id")
	}
}

func TestParseKeyed(t *testing.T) {
	b := []byte("usage_usec 1500\nuser_usec 1000\nsystem_usec 500\n")
	if got, err := parseKeyed(b, "usage_usec"); err != nil || got != 1500 {
		t.Errorf("parseKeyed = %d, %v", got, err)
	}
	if _, err := parseKeyed(b, "nr_periods"); err == nil {
		t.Errorf("parseKeyed found a missing key")
	}
}

// fixture writes files (path -> content) under a new temporary root.
func fixture(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, content := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestFallbackV1 follows threads through a v1 fixture tree: sums are
// cumulative across thread exits, new threads count in full, a vanished
// cgroup is left out.
func TestFallbackV1(t *testing.T) {
	testutil.SkipUnless(t, runtime.GOOS == "linux", "cgroup ids are inode numbers: linux only")
	root := fixture(t, map[string]string{
		"cgroup/cpu/brim/c1/tasks":             "10\n11\n",
		"cgroup/cpuacct/brim/c1/cpuacct.usage": "5000000\n",
		"proc/10/schedstat":                    "100 1000 10\n",
		"proc/11/schedstat":                    "200 3000 20\n",
	})
	f := newFallback(layout{root: filepath.Join(root, "cgroup")}, filepath.Join(root, "proc"))
	defer f.Close()
	if f.Source() != SourceSchedstat {
		t.Errorf("Source = %q", f.Source())
	}
	id, err := f.Track("/brim/c1")
	if err != nil {
		t.Fatal(err)
	}
	dst := map[uint64]CgroupStats{99: {}}
	if err := f.Read(dst); err != nil {
		t.Fatal(err)
	}
	want := CgroupStats{RunDelay: 4000, Waits: 30, Switches: 30, OnCPU: 5 * time.Millisecond}
	if len(dst) != 1 || dst[id] != want {
		t.Fatalf("first read = %+v, want only %d: %+v", dst, id, want)
	}

	// 10 exits, 11 runs on, 12 appears.
	writeFile(t, filepath.Join(root, "cgroup/cpu/brim/c1/tasks"), "11\n12\n")
	writeFile(t, filepath.Join(root, "proc/11/schedstat"), "300 3500 25\n")
	writeFile(t, filepath.Join(root, "proc/12/schedstat"), "50 700 3\n")
	writeFile(t, filepath.Join(root, "cgroup/cpuacct/brim/c1/cpuacct.usage"), "6000000\n")
	if err := f.Read(dst); err != nil {
		t.Fatal(err)
	}
	want = CgroupStats{RunDelay: 4000 + 500 + 700, Waits: 30 + 5 + 3, Switches: 38, OnCPU: 6 * time.Millisecond}
	if dst[id] != want {
		t.Fatalf("second read = %+v, want %+v", dst[id], want)
	}

	// A listed thread without schedstat (exited meanwhile) is skipped.
	writeFile(t, filepath.Join(root, "cgroup/cpu/brim/c1/tasks"), "11\n12\n13\n")
	if err := f.Read(dst); err != nil {
		t.Fatal(err)
	}
	if dst[id] != want {
		t.Fatalf("third read = %+v, want %+v", dst[id], want)
	}

	if err := os.RemoveAll(filepath.Join(root, "cgroup/cpu/brim/c1")); err != nil {
		t.Fatal(err)
	}
	if err := f.Read(dst); err != nil {
		t.Fatal(err)
	}
	if len(dst) != 0 {
		t.Errorf("vanished cgroup reported: %+v", dst)
	}
	if err := f.Untrack(id); err != nil {
		t.Errorf("untrack: %v", err)
	}
	if err := f.Untrack(id); err == nil {
		t.Errorf("untrack twice succeeded")
	}
}

func TestFallbackV2(t *testing.T) {
	testutil.SkipUnless(t, runtime.GOOS == "linux", "cgroup ids are inode numbers: linux only")
	root := fixture(t, map[string]string{
		"cgroup/brim/c1/cgroup.threads": "7\n",
		"cgroup/brim/c1/cpu.stat":       "usage_usec 2500\nuser_usec 2000\nsystem_usec 500\n",
		"proc/7/schedstat":              "1 900 9\n",
	})
	f := newFallback(layout{root: filepath.Join(root, "cgroup"), unified: true}, filepath.Join(root, "proc"))
	id, err := f.Track("/brim/c1")
	if err != nil {
		t.Fatal(err)
	}
	dst := map[uint64]CgroupStats{}
	if err := f.Read(dst); err != nil {
		t.Fatal(err)
	}
	want := CgroupStats{RunDelay: 900, Waits: 9, Switches: 9, OnCPU: 2500 * time.Microsecond}
	if dst[id] != want {
		t.Fatalf("read = %+v, want %+v", dst[id], want)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Read(dst); !errors.Is(err, ErrClosed) {
		t.Errorf("read after close: %v", err)
	}
}
