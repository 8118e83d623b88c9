package masteraddr

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

func TestParse(t *testing.T) {
	got, err := Parse(" 10.0.0.1:5050, m2:5050 ,[::1]:5050")
	if err != nil || len(got) != 3 || got[0] != "10.0.0.1:5050" || got[1] != "m2:5050" || got[2] != "[::1]:5050" {
		t.Fatalf("Parse: %q %v", got, err)
	}
	for _, bad := range []string{"", " ", "a:1,,b:2", "a:1,", "nohost", "a:", "a:1,a:1"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q): no error", bad)
		}
	}
}

func TestNotLeaderRoundTrip(t *testing.T) {
	for _, leader := range []string{"10.0.0.2:5050", ""} {
		err := fmt.Errorf("register: %w", NotLeader(leader))
		if status.Code(NotLeader(leader)) != codes.Unavailable {
			t.Fatalf("code %v", status.Code(NotLeader(leader)))
		}
		got, ok := Leader(err)
		if !ok || got != leader {
			t.Fatalf("Leader(%v) = %q %v, want %q", err, got, ok, leader)
		}
	}
	for _, other := range []error{errors.New("x"), status.Error(codes.Unavailable, "the leader is at 1.2.3.4:5"), nil} {
		if _, ok := Leader(other); ok {
			t.Errorf("Leader(%v): ok", other)
		}
	}
}

func TestSet(t *testing.T) {
	s := NewSet([]string{"a:1", "b:1", "c:1"})
	if s.Current() != "a:1" {
		t.Fatal(s.Current())
	}
	var seen []string
	for range 4 {
		seen = append(seen, s.Failed())
	}
	if fmt.Sprint(seen) != "[b:1 c:1 a:1 b:1]" {
		t.Fatalf("Failed rotates %v", seen)
	}
	if s.Follow("z:9") != "z:9" || s.Current() != "z:9" {
		t.Fatal("Follow")
	}
	if got := s.Failed(); got != "c:1" {
		t.Fatalf("after a followed leader fails: %s, want the next listed", got)
	}
	if got := s.Follow(""); got != "a:1" {
		t.Fatalf("Follow(\"\") = %s, want the next listed", got)
	}
}

func TestUnreachableLeader(t *testing.T) {
	s := NewSet([]string{"a:1", "b:1"})
	s.Failed() // a listed master, not a followed leader
	if s.Unreachable() != "" {
		t.Fatalf("Unreachable after a listed master failed: %q", s.Unreachable())
	}
	s.Follow("z:9")
	s.Failed()
	if s.Unreachable() != "z:9" {
		t.Fatalf("Unreachable after the followed leader failed: %q", s.Unreachable())
	}
	s.Reached()
	if s.Unreachable() != "" {
		t.Fatalf("Unreachable after Reached: %q", s.Unreachable())
	}
	out := WithUnreachable(context.Background(), "z:9")
	md, _ := metadata.FromOutgoingContext(out)
	in := metadata.NewIncomingContext(context.Background(), md)
	if got := UnreachableFrom(in); got != "z:9" {
		t.Fatalf("UnreachableFrom = %q", got)
	}
	if got := UnreachableFrom(context.Background()); got != "" {
		t.Fatalf("UnreachableFrom without metadata = %q", got)
	}
	if WithUnreachable(context.Background(), "") != context.Background() {
		t.Fatal("WithUnreachable(\"\") changed the context")
	}
}

// TestLostMaster: a listed master whose link broke is remembered as
// unreachable (a standby that still names it holds the client instead of
// sending it back) and the next address tried is another one; LinkDown
// tells such an error from a standby's answer and from the rest.
func TestLostMaster(t *testing.T) {
	s := NewSet([]string{"a:1", "b:1"})
	if got := s.Lost(); got != "b:1" || s.Unreachable() != "a:1" {
		t.Fatalf("Lost: now %s, unreachable %q; want b:1 and a:1", got, s.Unreachable())
	}
	// b:1 (a standby) names a:1 while its key lingers: followed, then
	// lost again, the client goes on to b:1, not to a:1 again.
	s.Follow("a:1")
	if got := s.Lost(); got != "b:1" || s.Unreachable() != "a:1" {
		t.Fatalf("after the followed dead leader: now %s, unreachable %q; want b:1 and a:1", got, s.Unreachable())
	}
	s.Reached()
	if s.Unreachable() != "" {
		t.Fatalf("Unreachable after Reached: %q", s.Unreachable())
	}
	left := NewSet([]string{"a:1", "b:1"})
	if left.Left(NotLeader("")); left.Unreachable() != "" {
		t.Errorf("Left after a standby's answer: unreachable %q, want none", left.Unreachable())
	}
	if left.Left(status.Error(codes.Unavailable, "EOF")); left.Unreachable() != "b:1" {
		t.Errorf("Left after a broken link: unreachable %q, want b:1", left.Unreachable())
	}
	one := NewSet([]string{"a:1"})
	if got := one.Lost(); got != "a:1" {
		t.Fatalf("Lost with one master: %s, want it again", got)
	}

	for _, c := range []struct {
		err  error
		down bool
	}{
		{status.Error(codes.Unavailable, "error reading from server: EOF"), true},
		{fmt.Errorf("session: %w", status.Error(codes.Unavailable, "connection refused")), true},
		{NotLeader("a:1"), false},
		{NotLeader(""), false},
		{status.Error(codes.DeadlineExceeded, "no Registered"), false},
		{status.Error(codes.Canceled, "context canceled"), false},
		{errors.New("plain"), false},
		{nil, false},
	} {
		if got := LinkDown(c.err); got != c.down {
			t.Errorf("LinkDown(%v) = %v, want %v", c.err, got, c.down)
		}
	}
}

// Exhausted once every listed address failed since the last success,
// and so until a master is reached or a standby names the leader — a
// discovery, failed or not, does not wait for another round: the list
// it read may name only the dead masters whose keys etcd still keeps.
// Replace starts over at the new list's first address.
func TestSetRediscovery(t *testing.T) {
	s := NewSet([]string{"a:1", "b:1"})
	if s.Exhausted() {
		t.Fatal("exhausted before any failure")
	}
	s.Failed()
	if s.Exhausted() {
		t.Fatal("exhausted after one of two failed")
	}
	s.Failed()
	if !s.Exhausted() {
		t.Fatal("not exhausted after both failed")
	}
	s.Reached()
	if s.Exhausted() {
		t.Fatal("exhausted after a master was reached")
	}
	s.Failed()
	s.Failed()
	log := slog.New(slog.DiscardHandler)
	Rediscover(context.Background(), func(context.Context) ([]string, error) { return nil, errors.New("etcd down") }, s, log)
	if !s.Exhausted() || s.String() != "a:1,b:1" {
		t.Fatalf("after a failed discovery: exhausted %v, list %s", s.Exhausted(), s)
	}
	Rediscover(context.Background(), func(context.Context) ([]string, error) { return []string{"c:1", "d:1"}, nil }, s, log)
	if s.String() != "c:1,d:1" || s.Current() != "c:1" || s.Len() != 2 {
		t.Fatalf("after a discovery: list %s, current %s", s, s.Current())
	}
	if s.Failed(); s.Current() != "d:1" || !s.Exhausted() {
		t.Fatalf("next after the discovery: %s, exhausted %v (want the next failure to discover again)", s.Current(), s.Exhausted())
	}
	if s.Follow("leader:1"); s.Exhausted() {
		t.Fatal("exhausted after a standby named the leader")
	}
	// One address: a failure exhausts it.
	one := NewSet([]string{"a:1"})
	if one.Failed(); !one.Exhausted() || one.Current() != "a:1" {
		t.Fatalf("one address: exhausted %v, current %s", one.Exhausted(), one.Current())
	}
}
