package master_test

import (
	"context"
	"errors"
	"testing"

	"github.com/brimnode/brim/master"
)

// frameworkWritesFail is a bbolt Store whose framework records cannot be
// written (etcd without a quorum, a full disk).
type frameworkWritesFail struct{ failingStore }

func (frameworkWritesFail) PutFramework(string, master.PersistedFramework) error { return errDiskFull }

// TestSubscribeRefusedWithoutItsRecord: a new framework whose record the
// registry cannot write is refused with ErrUnavailable (the SDK tries
// again) and not subscribed. Before, it was subscribed with the failure
// only logged: after a failover the next leader did not know it, took
// the finished task it had launched meanwhile for one of a framework
// that is gone, and answered its reconciliation LOST (chaos seed
// 20261129). A framework the store knows keeps subscribing.
func TestSubscribeRefusedWithoutItsRecord(t *testing.T) {
	store := storeOpener(t)()
	if err := store.PutFramework("known", master.PersistedFramework{Roles: []string{"default"}}); err != nil {
		t.Fatal(err)
	}
	m, err := master.New(master.Options{Store: frameworkWritesFail{failingStore{store}}})
	if err != nil {
		t.Fatal(err)
	}
	_, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	out := master.NewOutbox[master.ToFramework](cancel, master.FrameworkQueue)
	id, err := m.Subscribe(&master.Subscription{Info: &master.FrameworkInfo{Name: "new"}}, out)
	if !errors.Is(err, master.ErrUnavailable) {
		t.Fatalf("subscribe with its record unwritten: id %q, err %v, want ErrUnavailable", id, err)
	}
	if fws := m.State().Frameworks; len(fws) != 0 {
		t.Fatalf("frameworks after a refused subscribe: %+v", fws)
	}
	if _, err := m.Subscribe(&master.Subscription{Info: &master.FrameworkInfo{ID: "known", Name: "old"}}, out); err != nil {
		t.Fatalf("a framework the store knows: %v", err)
	}
}
