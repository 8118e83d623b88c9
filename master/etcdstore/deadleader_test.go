package etcdstore_test

import (
	"fmt"
	"syscall"
	"testing"
	"time"
)

// TestKilledLeaderReplacedBeforeItsTTL: the leader of two master
// processes, followed by 20 simulated agents, is killed with SIGKILL.
// Its session lease (TTL 30 s, refreshed every 10 s) would keep it
// elected 20 – 30 s after the kill; the agents tell the standby they
// cannot reach it, the standby finds its port refusing connections and
// ends its session, and leads within a third of the TTL. Every agent
// then re-registers there. With the standby told to wait the TTL out
// (Config.WaitOutDeadLeader) it is still not leading then.
func TestKilledLeaderReplacedBeforeItsTTL(t *testing.T) {
	etcd, _ := startEtcdProcs(t, 3)
	const ttl, agents = 30 * time.Second, 20
	for _, waitOut := range []bool{false, true} {
		t.Run(fmt.Sprintf("wait-out=%v", waitOut), func(t *testing.T) {
			margs := roleArgs{Endpoints: etcd, Prefix: fmt.Sprintf("/brim-dead-%v", waitOut), TTL: ttl, Heartbeat: time.Second, WaitOut: waitOut}
			first := startMasterProc(t, "master-1", margs)
			first.waitLeading(t, 30*time.Second)
			standby := startMasterProc(t, "master-2", margs)
			ag := startRole(t, "agents", "agents", roleArgs{Masters: []string{first.addr, standby.addr}, Agents: agents}, 0, 4*agents)
			registered := func(within time.Duration) {
				t.Helper()
				deadline := time.After(within)
				for i := 0; i < agents; {
					select {
					case l, ok := <-ag.lines:
						if !ok {
							t.Fatal("the agents' process ended")
						}
						var idx int
						var at int64
						if _, err := fmt.Sscanf(l, "reg %d %d", &idx, &at); err == nil {
							i++
						}
					case <-deadline:
						t.Fatalf("%d of %d agents registered within %v", i, agents, within)
					}
				}
			}
			registered(30 * time.Second)
			kill := time.Now()
			first.killed.Store(true)
			if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			if waitOut {
				select {
				case <-standby.elected:
					t.Fatalf("waiting out the TTL, the standby led %v after the kill (TTL %v)",
						time.Unix(0, standby.leading.Load()).Sub(kill).Round(time.Millisecond), ttl)
				case <-time.After(ttl / 3):
				}
				return
			}
			at := standby.waitLeading(t, ttl/3)
			t.Logf("new leader %v after the kill (session TTL %v)", at.Sub(kill).Round(time.Millisecond), ttl)
			registered(30 * time.Second)
			t.Logf("all %d agents back %v after the kill", agents, time.Since(kill).Round(time.Millisecond))
		})
	}
}
