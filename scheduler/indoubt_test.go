package scheduler_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/brimnode/brim/internal/masteraddr"
	"github.com/brimnode/brim/scheduler"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestInDoubt: only a call that ended without the master's answer may
// have been carried out; a standby's answer, the master's refusals and a
// call never made were not.
func TestInDoubt(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{status.Error(codes.Unavailable, "error reading from server: EOF"), true},
		{fmt.Errorf("launch: %w", status.Error(codes.Unavailable, "connection reset by peer")), true},
		{status.Error(codes.DeadlineExceeded, "context deadline exceeded"), true},
		{status.Error(codes.Canceled, "context canceled"), true},
		{masteraddr.NotLeader("127.0.0.1:1"), false},
		{masteraddr.NotLeader(""), false},
		{status.Error(codes.InvalidArgument, `task ID "t" is in use`), false},
		{status.Error(codes.FailedPrecondition, "stale offer"), false},
		{status.Error(codes.PermissionDenied, "forbidden"), false},
		{status.Error(codes.Internal, "bug"), false},
		{scheduler.ErrNotSubscribed, false},
		{context.Canceled, false}, // not the status of a call
		{errors.New("other"), false},
	} {
		if got := scheduler.InDoubt(tc.err); got != tc.want {
			t.Errorf("InDoubt(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
