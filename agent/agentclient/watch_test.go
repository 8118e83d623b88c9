package agentclient

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/brimnode/brim/agent/agentpb"
	"google.golang.org/grpc"
)

// fakeStats answers Stats with a cpu counter that grows by one second per
// call, and fails after failAfter calls (0: never).
type fakeStats struct {
	calls, failAfter int
	cancel           func() // called at the call number cancelAt
	cancelAt         int
}

var errSample = errors.New("sample failed")

func (f *fakeStats) Stats(_ context.Context, in *agentpb.StatsRequest, _ ...grpc.CallOption) (*agentpb.Statistics, error) {
	f.calls++
	if f.failAfter > 0 && f.calls > f.failAfter {
		return nil, errSample
	}
	if f.cancel != nil && f.calls == f.cancelAt {
		f.cancel()
	}
	return &agentpb.Statistics{Id: in.Id, MilliCpus: 1000, CpuUsageNanos: uint64(f.calls) * 1e9,
		TimestampUnixNano: int64(f.calls) * 1e9}, nil
}

// List answers two containers: a running, b exited.
func (f *fakeStats) List(context.Context, *agentpb.ListRequest, ...grpc.CallOption) (*agentpb.ListResponse, error) {
	return &agentpb.ListResponse{Containers: []*agentpb.Container{{Id: "a", State: "running"}, {Id: "b", State: "exited"}}}, nil
}

func TestWatchStats(t *testing.T) {
	ctx := context.Background()
	api := &fakeStats{}
	var got [][]Stats
	emit := func(rows []Stats) error { got = append(got, rows); return nil }
	if err := WatchStats(ctx, api, []string{"a", "b"}, time.Millisecond, false, emit); err != nil {
		t.Fatal(err)
	}
	if api.calls != 4 || len(got) != 1 || len(got[0]) != 2 || got[0][0].ID != "a" || got[0][1].ID != "b" {
		t.Fatalf("one round: %d calls, rows %+v", api.calls, got)
	}

	// A sample's error ends the watch with that error.
	api, got = &fakeStats{failAfter: 5}, nil
	if err := WatchStats(ctx, api, []string{"a"}, time.Millisecond, true, emit); !errors.Is(err, errSample) {
		t.Fatalf("watch with a failing sample: %v", err)
	}
	if len(got) != 4 {
		t.Errorf("rounds before the failure: %d, want 4", len(got))
	}

	// emit's error ends it too.
	errEmit := errors.New("emit failed")
	if err := WatchStats(ctx, &fakeStats{}, []string{"a"}, time.Millisecond, true, func([]Stats) error { return errEmit }); !errors.Is(err, errEmit) {
		t.Fatalf("watch with a failing emit: %v", err)
	}

	// The end of ctx while waiting ends it without an error.
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	api = &fakeStats{cancel: cancel, cancelAt: 3}
	if err := WatchStats(cctx, api, []string{"a"}, time.Millisecond, true, func([]Stats) error { return nil }); err != nil {
		t.Fatalf("watch ended by ctx: %v", err)
	}

	// No ids: every running container, listed each round.
	api, got = &fakeStats{}, nil
	if err := WatchStats(ctx, api, nil, time.Millisecond, false, emit); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || len(got[0]) != 1 || got[0][0].ID != "a" || got[0][0].CPUPercent != 100 {
		t.Fatalf("all running: rows %+v", got)
	}
}
