package runner

import (
	"slices"
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
		milli, mem int64
		rev        bool
		want       string
	}{
		{250, 64, false, "cpus:0.25;mem:64"},
		{2000, 128, false, "cpus:2;mem:128"},
		{1, 1, true, "cpus{REV}:0.001;mem{REV}:1"},
	} {
		got, err := Want(tc.milli, tc.mem, tc.rev)
		if err != nil || got.String() != tc.want {
			t.Errorf("Want(%d, %d, %v) = %v, %v; want %s", tc.milli, tc.mem, tc.rev, got, err, tc.want)
		}
	}
}
