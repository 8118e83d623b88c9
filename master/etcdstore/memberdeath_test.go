package etcdstore_test

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/brimnode/brim/internal/testutil"
	"github.com/brimnode/brim/master"
	"github.com/brimnode/brim/master/etcdstore"
)

// raftLeader is the index of e's member that leads etcd's raft.
func raftLeader(t *testing.T, e *etcdProcs) int {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: e.clients, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cli.Close() }()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		for i, ep := range e.clients {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			st, err := cli.Status(ctx, ep)
			cancel()
			if err == nil && st.Leader != 0 && st.Leader == st.Header.MemberId {
				return i
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal("no raft leader among the members")
	return -1
}

// TestMemberDeathKeepsTheLeader: one etcd member of three is killed
// (kill -9), etcd's raft leader or a follower, and the leading master
// writes at once (TTL 4 s, the default request timeout): the write must
// go through after a short pause — the time etcd takes to elect another
// raft leader — and the master must keep its leadership: a single
// member's death is not a failover. Before, the write failed at once
// (Unavailable: sent on the dead member's connection, which the etcd
// client does not retry for a mutation) or waited out the whole request
// timeout (forwarded to the dead raft leader, its proposal lost), with
// the master behind it (issue 30, chaos etcd-member-kill).
func TestMemberDeathKeepsTheLeader(t *testing.T) {
	for _, which := range []string{"raft leader", "follower"} {
		t.Run(which, func(t *testing.T) {
			e := startEtcdMembers(t, 3)
			c := &etcdCluster{clients: e.clients}
			ttl := 4 * time.Second
			m := startHAMasterTimeout(t, c, ttl, etcdstore.DefaultRequestTimeout, "127.0.0.1:0", master.Options{AllocationInterval: 50 * time.Millisecond,
				HeartbeatInterval: 200 * time.Millisecond, MaxMissedHeartbeats: 10, Log: testutil.FailureLog(t, "master")})
			leader := leaderOf(t, []*haMaster{m}, 20*time.Second)
			victim := raftLeader(t, e)
			if which == "follower" {
				victim = (victim + 1) % 3
			}
			if err := leader.r.Leading().SetWeights(map[string]float64{"before": 2}); err != nil {
				t.Fatal(err)
			}
			killed := time.Now()
			e.kill(t, victim)
			start := time.Now()
			err := leader.r.Leading().SetWeights(map[string]float64{"after": 3})
			took := time.Since(start)
			// The term ends TTL·3/4 after the last refresh etcd acknowledged.
			time.Sleep(2 * ttl)
			t.Logf("killed member %d (%s): a write %v after it took %v (err %v)", victim, which, start.Sub(killed), took, err)
			select {
			case <-leader.stopped:
				t.Fatalf("the leader stepped down after the death of one etcd member (%s): %v", which, leader.err)
			default:
			}
			if err != nil {
				t.Errorf("a write after the death of one etcd member (%s): %v", which, err)
			}
		})
	}
}
