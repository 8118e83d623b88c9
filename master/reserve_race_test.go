package master_test

import (
	"sync"
	"testing"
	"time"

	"github.com/brimnode/brim/master"
	"github.com/brimnode/brim/master/boltstore"
	"github.com/brimnode/brim/resources"
)

// heldReservationsStore is a bbolt Store whose PutReservations waits for
// the test: entered (buffered) says a write began, release lets it go
// on.
type heldReservationsStore struct {
	*boltstore.Store
	entered, release chan struct{}
}

func (s heldReservationsStore) PutReservations(id string, r resources.Resources) error {
	s.entered <- struct{}{}
	<-s.release
	return s.Store.PutReservations(id, r)
}

// TestAgentReregistersDuringAReservationWrite: the master drops its lock
// while the store records a reservation; the agent re-registering
// meanwhile is added back to the allocator with the reservations the
// master knows. Before, those were the ones from before the change (it
// set its own record only after the write): the master reported
// cpus(ads):1 reserved while the allocator had none, and unreserving it
// failed "not reserved".
func TestAgentReregistersDuringAReservationWrite(t *testing.T) {
	store := heldReservationsStore{Store: storeOpener(t)(), entered: make(chan struct{}, 10), release: make(chan struct{})}
	c := newCluster(t, master.Options{Store: store})
	// Registered after the cluster's cleanup, so run before it: a test
	// that fails while the write is held must not leave the master's
	// writer (and its Close) waiting for ever.
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(store.release) }) }
	t.Cleanup(release)
	dir := t.TempDir()
	r := newFakeRunner()
	stop := c.startAgent(dir, r)
	agentID := waitAgents(t, c.m, 1)[0].ID

	done := make(chan error, 1)
	go func() { done <- c.m.Reserve(agentID, "", resources.MustParse("cpus(ads):1")) }()
	select {
	case <-store.entered:
	case <-time.After(30 * time.Second):
		t.Fatal("the reservation was never written")
	}
	// The agent's link breaks and comes back while the write is held.
	stop()
	waitState(t, c.m, "the agent's link broken", func(st master.State) bool { return len(st.Agents) == 1 && !st.Agents[0].Connected })
	c.startAgent(dir, r)
	waitState(t, c.m, "the agent registered again", func(st master.State) bool {
		return len(st.Agents) == 1 && st.Agents[0].Connected && st.Agents[0].ID == agentID
	})
	time.Sleep(200 * time.Millisecond) // its registration, in the allocator, is done with
	release()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("reserve: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("reserve did not return once its write was let through")
	}
	if err := c.m.Unreserve(agentID, "", resources.MustParse("cpus(ads):1")); err != nil {
		t.Fatalf("unreserve what was reserved: %v", err)
	}
}
