package master

import (
	"context"
	"time"
)

// A highly available master's contract with its store (master/etcdstore
// implements it; master/server runs it): an Elector elects one leader
// among the masters of a cluster, and each leadership is a Term whose
// Store writes only while it lasts. The domain itself never campaigns:
// each term gets a Master of its own, made with the term's Store.

// Elector elects one leader among the masters of a cluster (etcdstore's
// Client on etcd). Campaign blocks until this master leads, advertising
// addr, or ctx ends; Observe sends the leader's address ("" while none is
// elected) at once and at every change until ctx ends, then closes.
type Elector interface {
	Campaign(ctx context.Context, addr string) (Term, error)
	Observe(ctx context.Context) <-chan string
}

// LeaderEnder is an optional ability of an Elector: EndLeader ends the
// session of the leader advertised at addr at once — its key goes, the
// next standby is elected, and the leader, if it still runs, finds its
// lease gone and steps down — and reports false, doing nothing, when
// addr no longer leads. A standby calls it for a leader whose process
// is gone.
type LeaderEnder interface {
	EndLeader(ctx context.Context, addr string) (bool, error)
}

// SessionTTLer is an optional ability of an Elector: the lease of its
// election sessions, after which a dead leader's key is gone.
type SessionTTLer interface {
	SessionTTL() time.Duration
}

// Term is one leadership. Its Store writes only while it lasts (a fenced
// store: a deposed leader's writes fail with ErrNotLeader); Done is
// closed the moment it is lost (the session's lease expired); Resign
// gives it up at once.
type Term interface {
	Store() Store
	Done() <-chan struct{}
	Resign(ctx context.Context) error
}
