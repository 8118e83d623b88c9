package masteraddr

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
)

// Bounds of WatchLeader.
const (
	// WatchHold bounds how long a master holds a WatchLeader call whose
	// leader has not changed (the master's side); the client asks again.
	WatchHold = 20 * time.Second
	// watchSlack is what a held call may take beyond WatchHold before
	// the client gives up on the master it watches (frozen, cut off).
	watchSlack = 5 * time.Second
	// askTimeout bounds a call that is not held: the first one to a
	// watched master, and the check of the master in use.
	askTimeout = time.Second
	// watchRetry spaces the calls after a failed one.
	watchRetry = time.Second
)

// Asker asks the master at addr who leads (the Masters service): at
// once, or with hold once the leader differs from known. leader is ""
// while none is elected; self says addr itself leads (leader is then
// its advertised address).
type Asker interface {
	AskLeader(ctx context.Context, addr, known string, hold bool) (leader string, self bool, err error)
}

// Leaders is an Asker over gRPC, one connection per master asked, made
// with the client's own dial options (TLS, credentials) when first
// needed. Safe for concurrent use; Close closes the connections.
type Leaders struct {
	dial []grpc.DialOption

	mu     sync.Mutex
	conns  map[string]*grpc.ClientConn
	closed bool
}

// NewLeaders returns a Leaders dialing with dial.
func NewLeaders(dial []grpc.DialOption) *Leaders {
	return &Leaders{dial: dial, conns: map[string]*grpc.ClientConn{}}
}

// ErrClosed: a Leaders used after Close.
var ErrClosed = errors.New("leader watch closed")

// AskLeader calls the Masters service of the master at addr.
func (l *Leaders) AskLeader(ctx context.Context, addr, known string, hold bool) (string, bool, error) {
	cc, err := l.conn(addr)
	if err != nil {
		return "", false, err
	}
	info, err := pb.NewMastersClient(cc).WatchLeader(ctx, &pb.WatchLeaderRequest{Known: known, Hold: hold})
	if err != nil {
		return "", false, err
	}
	return info.GetLeader(), info.GetSelf(), nil
}

func (l *Leaders) conn(addr string) (*grpc.ClientConn, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, ErrClosed
	}
	if cc := l.conns[addr]; cc != nil {
		return cc, nil
	}
	cc, err := grpc.NewClient(addr, l.dial...)
	if err != nil {
		return nil, fmt.Errorf("dial master %s: %w", addr, err)
	}
	l.conns[addr] = cc
	return cc, nil
}

// Close closes every connection; calls in flight fail.
func (l *Leaders) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	var errs []error
	for _, cc := range l.conns {
		errs = append(errs, cc.Close())
	}
	clear(l.conns)
	return errors.Join(errs...)
}

// LeaderMovedError ends a client's session with a master that no longer
// answers as the leader while another master names a new one
// (WatchLeader). Leader reads it as it reads a standby's answer: the
// client follows the new leader.
type LeaderMovedError struct {
	Leader string // the new leader, as the other master named it
	From   string // the master the session was with
	Why    error  // what the master in use answered: nil (it says it leads no more) or the failed call
}

func (e *LeaderMovedError) Error() string {
	if e.Why != nil {
		return fmt.Sprintf("%s was elected leader and %s does not answer (%v)", e.Leader, e.From, e.Why)
	}
	return fmt.Sprintf("%s was elected leader and %s leads no more", e.Leader, e.From)
}

// Others are the listed addresses other than cur.
func (s *Set) Others(cur string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, a := range s.addrs {
		if a != cur {
			out = append(out, a)
		}
	}
	return out
}

// WatchLeader watches the election for a client whose session is with
// the master at cur, until ctx ends or the leader moves. A frozen
// leader's sockets still accept (the kernel completes the handshakes)
// and its streams stay open without a word: gRPC's keepalive finds it
// after 15 s at the earliest (its floor for pings is 10 s), long past
// the election of the next leader. So the client asks another listed
// master — a standby, which learns the leader from etcd — who leads,
// holding the question until the answer changes (one call every
// WatchHold, no traffic to the leader at all); when it names a leader
// other than cur, the client asks cur itself: a cur that answers that
// it leads (the other's view lags, or names cur under the address it
// advertises) is kept; one that says it leads no more, or does not
// answer within askTimeout, is left: WatchLeader returns a
// *LeaderMovedError naming the new leader, and the client's session
// ends with it. A master that does not answer the watch is replaced by
// the next listed one; one without the service (an older master) is
// not asked again. With no other master listed it only waits for ctx.
func WatchLeader(ctx context.Context, s *Set, cur string, ask Asker, log *slog.Logger) error {
	aliases := map[string]bool{cur: true} // the names cur goes by
	others := s.Others(cur)
	i := 0
	if len(others) > 1 {
		i = rand.IntN(len(others)) // spread the watchers over the standbys
	}
	known, hold := "", false
	for {
		if len(others) == 0 {
			<-ctx.Done()
			return ctx.Err()
		}
		target := others[i%len(others)]
		timeout := askTimeout
		if hold {
			timeout = WatchHold + watchSlack
		}
		actx, cancel := context.WithTimeout(ctx, timeout)
		leader, self, err := ask.AskLeader(actx, target, known, hold)
		cancel()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			if status.Code(err) == codes.Unimplemented {
				others = append(others[:i%len(others)], others[i%len(others)+1:]...)
			} else {
				log.Debug("watch the leader: the master watched does not answer; asking the next", "master", target, "err", err)
				i++
			}
			known, hold = "", false
			if err := sleep(ctx, watchRetry); err != nil {
				return err
			}
			continue
		}
		if self && aliases[leader] { // target is cur under another name
			others = append(others[:i%len(others)], others[i%len(others)+1:]...)
			known, hold = "", false
			continue
		}
		known, hold = leader, true
		if leader == "" || aliases[leader] {
			continue
		}
		moved, err := leftBy(ctx, ask, cur, leader, aliases)
		if err != nil {
			return err
		}
		if moved != nil {
			log.Warn("a new leader was elected and the master in use does not answer as the leader: moving", "master", cur,
				"leader", leader, "named_by", target, "why", moved.Why)
			return moved
		}
	}
}

// leftBy asks cur whether it still leads, a leader other than cur having
// been named: nil if it answers that it does (its advertised address is
// then one of cur's aliases), a *LeaderMovedError if it does not answer
// or says it leads no more.
func leftBy(ctx context.Context, ask Asker, cur, leader string, aliases map[string]bool) (*LeaderMovedError, error) {
	vctx, cancel := context.WithTimeout(ctx, askTimeout)
	advertised, self, err := ask.AskLeader(vctx, cur, "", false)
	cancel()
	switch {
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case err == nil && self:
		aliases[advertised] = true
		return nil, nil
	case status.Code(err) == codes.Unimplemented:
		return nil, nil // an older master: cannot tell; its own link decides
	case err == nil:
		return &LeaderMovedError{Leader: leader, From: cur}, nil
	default:
		return &LeaderMovedError{Leader: leader, From: cur, Why: err}, nil
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
