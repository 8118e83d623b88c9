package agent

import (
	"context"
	"errors"
	"strconv"
	"testing"
)

// ioCgroups is a fakeCgroups that can also limit io.
type ioCgroups struct{ fakeCgroups }

func (f *ioCgroups) SetIOLimit(_ context.Context, id string, bps int64) error {
	f.record("io " + id + " " + strconv.FormatInt(bps, 10))
	return nil
}

// TestActuatorIOLimit: the QoS actuator passes THROTTLE_IO to a cgroup
// actuator that can limit io (the hook the cgroups isolator fills), and
// says ErrNotSupported for one that cannot.
func TestActuatorIOLimit(t *testing.T) {
	ctx := context.Background()
	if err := (actuator{cg: &fakeCgroups{}}).SetIOLimit(ctx, "d", 1<<20); !errors.Is(err, ErrNotSupported) {
		t.Fatalf("without io: %v", err)
	}
	cg := &ioCgroups{}
	x := actuator{cg: cg}
	if err := x.SetIOLimit(ctx, "d", 1<<20); err != nil {
		t.Fatal(err)
	}
	if err := x.SetIOLimit(ctx, "d", 0); err != nil {
		t.Fatal(err)
	}
	if got := cg.String(); got != "io d 1048576, io d 0" {
		t.Fatalf("calls %q", got)
	}
}
