package runner

import (
	"slices"
	"strings"
	"testing"
)

func TestTaskIDs(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want []string
	}{
		{1, []string{"run-1"}},
		{3, []string{"run-1-0", "run-1-1", "run-1-2"}},
	} {
		if got := TaskIDs("run-1", tc.n); !slices.Equal(got, tc.want) {
			t.Errorf("TaskIDs(run-1, %d) = %v, want %v", tc.n, got, tc.want)
		}
	}
}

func TestWant(t *testing.T) {
	for _, tc := range []struct {
		milli, mem, net int64
		rev             bool
		want            string
	}{
		{250, 64, 0, false, "cpus:0.25;mem:64"},
		{2000, 128, 0, false, "cpus:2;mem:128"},
		{1, 1, 0, true, "cpus{REV}:0.001;mem{REV}:1"},
		{100, 32, 10, false, "cpus:0.1;mem:32;net_bw:10"},
	} {
		got, err := Want(tc.milli, tc.mem, tc.net, tc.rev)
		if err != nil || got.String() != tc.want {
			t.Errorf("Want(%d, %d, %d, %v) = %v, %v; want %s", tc.milli, tc.mem, tc.net, tc.rev, got, err, tc.want)
		}
	}
	for _, bad := range []struct {
		net  int64
		rev  bool
		want string
	}{{10, true, "never revocable"}, {-1, false, "must not be negative"}} {
		if _, err := Want(100, 32, bad.net, bad.rev); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("Want(net %d, revocable %v) = %v, want an error saying %q", bad.net, bad.rev, err, bad.want)
		}
	}
}
