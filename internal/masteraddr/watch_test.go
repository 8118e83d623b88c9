package masteraddr

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// script answers AskLeader from a table: per address, the answers in
// turn (the last one repeated); a held call whose answer equals what the
// client knows waits for ctx, as a master holds it.
type script struct {
	mu      sync.Mutex
	answers map[string][]answer
	asked   []string
}

type answer struct {
	leader string
	self   bool
	err    error
}

func (s *script) AskLeader(ctx context.Context, addr, known string, hold bool) (string, bool, error) {
	s.mu.Lock()
	s.asked = append(s.asked, addr)
	as := s.answers[addr]
	if len(as) == 0 {
		s.mu.Unlock()
		return "", false, status.Error(codes.Unavailable, "no such master")
	}
	a := as[0]
	if len(as) > 1 {
		s.answers[addr] = as[1:]
	}
	s.mu.Unlock()
	if a.err == nil && hold && a.leader == known {
		<-ctx.Done()
		return "", false, ctx.Err()
	}
	if errors.Is(a.err, context.DeadlineExceeded) { // a master that does not answer
		<-ctx.Done()
		return "", false, status.FromContextError(ctx.Err()).Err()
	}
	return a.leader, a.self, a.err
}

// TestWatchLeader: the client with cur leaves it only when another
// master names a new leader and cur does not answer as the leader; a
// standby naming cur under its advertised address, or a cur that still
// says it leads, keeps it; a master without the service is not asked
// again.
func TestWatchLeader(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	for _, c := range []struct {
		name    string
		answers map[string][]answer
		moved   string // "": stays until ctx ends
		why     bool   // the moved error carries cur's failed call
	}{
		{"cur frozen, new leader elected", map[string][]answer{
			"b:1": {{leader: "a:1"}, {leader: "b:1", self: true}},
			"a:1": {{err: context.DeadlineExceeded}},
		}, "b:1", true},
		{"cur deposed, says so", map[string][]answer{
			"b:1": {{leader: "c:1"}},
			"a:1": {{leader: "c:1"}},
		}, "c:1", false},
		{"standby names cur by its advertised address", map[string][]answer{
			"b:1": {{leader: "10.0.0.1:1"}},
			"a:1": {{leader: "10.0.0.1:1", self: true}},
		}, "", false},
		{"standby's view lags, cur still leads", map[string][]answer{
			"b:1": {{leader: "c:1"}},
			"a:1": {{leader: "a:1", self: true}},
		}, "", false},
		{"an older master without the service, then one with it", map[string][]answer{
			"b:1": {{err: status.Error(codes.Unimplemented, "unknown service")}},
			"c:1": {{leader: "b:1"}},
			"a:1": {{err: context.DeadlineExceeded}},
		}, "b:1", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := NewSet([]string{"a:1", "b:1", "c:1"})
			ask := &script{answers: c.answers}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			err := WatchLeader(ctx, s, "a:1", ask, log)
			var moved *LeaderMovedError
			switch {
			case c.moved == "" && !errors.Is(err, context.DeadlineExceeded):
				t.Fatalf("WatchLeader = %v, want to stay until ctx ends (asked %v)", err, ask.asked)
			case c.moved != "" && !errors.As(err, &moved):
				t.Fatalf("WatchLeader = %v, want a move to %s (asked %v)", err, c.moved, ask.asked)
			case c.moved != "" && (moved.Leader != c.moved || moved.From != "a:1" || (moved.Why != nil) != c.why):
				t.Fatalf("moved %+v, want to %s from a:1 (why given: %v)", moved, c.moved, c.why)
			}
			if l, ok := Leader(err); c.moved != "" && (!ok || l != c.moved) {
				t.Errorf("Leader(%v) = %q %v, want the new leader", err, l, ok)
			}
		})
	}
}
