package etcdstore_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/brimnode/brim/master/discovery"
)

// TestDiscoverWithoutQuorum: two masters campaign on a 3-member etcd,
// then two members die (the quorum is lost): Discover must still list
// both masters, the leader first, from what the live member holds.
// Before, it read linearizably: it waited out the dial timeout and
// failed, and an `etcd://` agent that asked while the quorum was lost
// reached the leader elected after its return 8.58 s late (issue 30,
// chaos etcd-quorum-loss).
func TestDiscoverWithoutQuorum(t *testing.T) {
	e := startEtcdMembers(t, 3)
	const ttl = 30 * time.Second // no lease may expire here
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a := open(t, e.clients, "/brim-noquorum", ttl)
	b := open(t, e.clients, "/brim-noquorum", ttl)
	if _, err := a.Campaign(ctx, "10.0.0.1:5050"); err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = b.Campaign(ctx, "10.0.0.2:5050") }() // waits behind a until ctx ends
	cfg := discovery.Config{Endpoints: e.clients, Prefix: "/brim-noquorum"}
	want := []string{"10.0.0.1:5050", "10.0.0.2:5050"}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		got, err := discovery.Discover(ctx, cfg)
		if err == nil && slices.Equal(got, want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Discover with the quorum = %v, %v; want %v", got, err, want)
		}
	}

	e.kill(t, 0)
	e.kill(t, 1)
	start := time.Now()
	got, err := discovery.Discover(ctx, cfg)
	t.Logf("Discover without the quorum took %v", time.Since(start).Round(time.Millisecond))
	if err != nil {
		t.Fatalf("Discover without the quorum: %v", err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("Discover without the quorum = %v, want %v", got, want)
	}
}
