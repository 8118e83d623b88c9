package masteraddr

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Parse splits a --master value, host:port[,host:port…], into its
// addresses. Every entry must be host:port with a port; an empty entry,
// one without a port or a duplicate is an error naming it.
func Parse(s string) ([]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, errors.New("no master address")
	}
	var out []string
	seen := map[string]bool{}
	for _, a := range strings.Split(s, ",") {
		a = strings.TrimSpace(a)
		if a == "" {
			return nil, fmt.Errorf("master list %q: empty entry", s)
		}
		_, port, err := net.SplitHostPort(a)
		if err != nil {
			return nil, fmt.Errorf("master address %q: %w (want host:port)", a, err)
		}
		if port == "" {
			return nil, fmt.Errorf("master address %q: no port", a)
		}
		if seen[a] {
			return nil, fmt.Errorf("master list %q: %q named twice", s, a)
		}
		seen[a] = true
		out = append(out, a)
	}
	return out, nil
}

// Reason and Domain of the ErrorInfo detail that names the leader.
const (
	Reason    = "NOT_LEADER"
	Domain    = "brim"
	leaderKey = "leader"
)

// NotLeader is the gRPC status a standby master answers every call with:
// codes.Unavailable, with an ErrorInfo detail whose metadata "leader" is
// the leader's address ("" while none is elected).
func NotLeader(leader string) error {
	msg := "this master is a standby; no leader is elected yet"
	if leader != "" {
		msg = "this master is a standby; the leader is at " + leader
	}
	st := status.New(codes.Unavailable, msg)
	if d, err := st.WithDetails(&errdetails.ErrorInfo{Reason: Reason, Domain: Domain, Metadata: map[string]string{leaderKey: leader}}); err == nil {
		st = d
	}
	return st.Err()
}

// Leader reads a standby's answer (NotLeader), also wrapped: whether err
// is one, and the leader it names ("" when none is elected). A
// *LeaderMovedError (WatchLeader) reads the same: the client follows the
// leader it names.
func Leader(err error) (leader string, ok bool) {
	var moved *LeaderMovedError
	if errors.As(err, &moved) {
		return moved.Leader, true
	}
	var se interface{ GRPCStatus() *status.Status }
	if !errors.As(err, &se) {
		return "", false
	}
	for _, d := range se.GRPCStatus().Details() {
		if ei, isInfo := d.(*errdetails.ErrorInfo); isInfo && ei.GetReason() == Reason && ei.GetDomain() == Domain {
			return ei.GetMetadata()[leaderKey], true
		}
	}
	return "", false
}

// Set is a client's view of the masters: the listed addresses and the
// leader last learnt. Current is the address to use; Follow moves to a
// leader a standby named, Failed to the next listed address. Safe for
// concurrent use.
type Set struct {
	mu     sync.Mutex
	addrs  []string
	next   int    // index in addrs of the next address to try
	leader string // a leader named by a standby, tried first; "" none
	cur    string
	// unreachable is a leader a standby named that could not be
	// reached (dead, its key not yet expired in etcd); "" none.
	unreachable string
	// misses counts the failures since a master was last reached or the
	// list replaced; exhausted is set once they reach the list's length
	// and kept until a master is reached or a standby names the leader
	// (Exhausted).
	misses    int
	exhausted bool
}

// NewSet returns a Set of addrs (Parse's result), starting at the first.
func NewSet(addrs []string) *Set {
	s := &Set{addrs: append([]string(nil), addrs...)}
	s.cur = s.addrs[0]
	s.next = 1 % len(s.addrs)
	return s
}

// Len is the number of listed addresses.
func (s *Set) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.addrs)
}

// String is the list as given.
func (s *Set) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.addrs, ",")
}

// Current is the address to use now.
func (s *Set) Current() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur
}

// Follow makes leader the current address (a standby named it); it may
// be outside the list (an advertised address). An empty leader is
// Failed: no leader is elected, try the next.
func (s *Set) Follow(leader string) string {
	if leader == "" {
		return s.Failed()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.leader, s.cur = leader, leader
	s.exhausted = false // a master answered, naming the leader
	return s.cur
}

// Failed moves on from the current address (no longer the leader, or
// it failed the client otherwise): to the next listed one, round robin.
// A followed leader that failed is remembered (Unreachable) until
// Reached.
func (s *Set) Failed() string { return s.moveOn(false) }

// Lost moves on from the current address because it could not be
// reached or the link to it broke (LinkDown): it is remembered
// (Unreachable) until Reached, and the next listed address other than it
// is tried. A leader that died is lost to all its followers at once; a
// standby they reach next names it until its lease expires in etcd, and
// told it is unreachable the standby holds them until the election
// instead of sending them back to it — before, 50,000 agents of a killed
// leader made 3.3 streams each on the way to the new one (its standby's
// answer, the dead leader twice).
func (s *Set) Lost() string { return s.moveOn(true) }

// Left moves on from the current address after err ended the client's
// session with it (not a standby's answer, which Follow takes): Lost if
// the link broke (LinkDown), else Failed.
func (s *Set) Left(err error) string { return s.moveOn(LinkDown(err)) }

func (s *Set) moveOn(lost bool) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.misses++
	if s.misses >= len(s.addrs) {
		s.exhausted = true
	}
	if lost || (s.leader != "" && s.cur == s.leader) {
		s.unreachable = s.cur
	}
	s.leader = ""
	for range len(s.addrs) { // the unreachable one last
		s.cur = s.addrs[s.next]
		s.next = (s.next + 1) % len(s.addrs)
		if s.cur != s.unreachable {
			break
		}
	}
	return s.cur
}

// LinkDown reports whether err says the master could not be reached or
// the link to it broke: a gRPC Unavailable that is not a standby's
// answer (NotLeader).
func LinkDown(err error) bool {
	if _, standby := Leader(err); standby {
		return false
	}
	return status.Code(err) == codes.Unavailable
}

// Unreachable is the leader a standby named that this client then could
// not reach ("" none): the standbys' view lags its death by up to the
// session TTL. Sent with WithUnreachable, it makes a standby hold the
// stream until etcd names another leader instead of sending the client
// back to the dead one.
func (s *Set) Unreachable() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.unreachable
}

// Reached says the client registered (or subscribed) with the current
// master: whatever was unreachable is forgotten.
func (s *Set) Reached() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unreachable = ""
	s.misses, s.exhausted = 0, false
}

// Exhausted reports whether every listed address has failed (Failed,
// Lost, Left) since a master was last reached (Reached) or a standby
// named the leader (Follow): the masters may all have moved, time to
// discover them again (Replace). It stays so after a Replace until then:
// every failed attempt reads the masters again, for a list read while
// the dead masters' keys still lived in etcd may name only them (an
// agent once came 11.3 s after a leader at a new address, trying the
// dead ones of each list in turn).
func (s *Set) Exhausted() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.exhausted
}

// Replace lists addrs (a discovery's result, Parse's form) instead,
// starting over at the first, and forgets the misses (not whether the
// list was exhausted: see Exhausted). An empty addrs changes nothing.
func (s *Set) Replace(addrs []string) {
	if len(addrs) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.addrs = append(s.addrs[:0:0], addrs...)
	s.leader, s.misses = "", 0
	s.cur, s.next = s.addrs[0], 1%len(s.addrs)
}

// unreachableKey is the gRPC metadata key of WithUnreachable.
const unreachableKey = "brim-unreachable-leader"

// WithUnreachable adds the leader the client could not reach to the
// outgoing gRPC metadata of ctx ("" adds nothing).
func WithUnreachable(ctx context.Context, leader string) context.Context {
	if leader == "" {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, unreachableKey, leader)
}

// UnreachableFrom is the leader a client said it could not reach (the
// incoming metadata of a call), "" none.
func UnreachableFrom(ctx context.Context) string {
	if v := metadata.ValueFromIncomingContext(ctx, unreachableKey); len(v) > 0 {
		return v[0]
	}
	return ""
}

// DiscoverTimeout bounds one discovery of the masters (Rediscover).
const DiscoverTimeout = 5 * time.Second

// Rediscover asks discover for the masters (bounded by DiscoverTimeout)
// and lists them in s; a failed discovery keeps the list and is logged.
// Either way the next failed attempt asks again, until a master is
// reached (Exhausted).
func Rediscover(ctx context.Context, discover func(context.Context) ([]string, error), s *Set, log *slog.Logger) {
	dctx, cancel := context.WithTimeout(ctx, DiscoverTimeout)
	defer cancel()
	addrs, err := discover(dctx)
	if err != nil || len(addrs) == 0 {
		log.Warn("discover the masters: keeping the list", "masters", s.String(), "err", err)
		return
	}
	if got := strings.Join(addrs, ","); got != s.String() {
		log.Info("masters discovered", "masters", got, "were", s.String())
	}
	s.Replace(addrs)
}
