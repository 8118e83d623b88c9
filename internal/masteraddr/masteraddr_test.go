package masteraddr

import (
	"context"
	"errors"
	"fmt"
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
