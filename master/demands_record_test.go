package master_test

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/brimnode/brim/demand"
	"github.com/brimnode/brim/master"
	"github.com/brimnode/brim/master/boltstore"
)

// demandWritesFail is a bbolt Store whose demand records fail while
// failing is set (etcd without a quorum).
type demandWritesFail struct {
	*boltstore.Store
	failing *atomic.Bool
}

func (s demandWritesFail) PutDemand(d *demand.Demand) error {
	if s.failing.Load() {
		return errDiskFull
	}
	return s.Store.PutDemand(d)
}

// TestDemandAnsweredOnlyOnceRecorded: a demand the registry cannot
// record is answered 503, is not in /demands, holds nothing, and its
// framework hears it FAILED; submitted again once the registry answers,
// it is accepted. Before, it was answered 200 ACCEPTED with the write
// still behind it: a failed write was only logged, and the next leader,
// reading the registry, had never heard of the demand.
func TestDemandAnsweredOnlyOnceRecorded(t *testing.T) {
	start := time.Now().UTC().Truncate(time.Second)
	clock := &testClock{t: start}
	failing := &atomic.Bool{}
	store := demandWritesFail{Store: storeOpener(t)(), failing: failing}
	c := newCluster(t, master.Options{Store: store, Demands: master.DemandOptions{Lead: time.Minute, PickUp: time.Hour, Clock: clock.Now}})
	c.startAgent(t.TempDir(), newFakeRunner())
	waitAgents(t, c.m, 1)
	f := c.startDemandFramework("planned", false)
	h := httpHandler(c.api, nil)
	doc := `{"DemandID": "night", "FrameworkID": "` + f.d.FrameworkID() + `", "Resources": "cpus:3;mem:1024",
	  "Start": {"Time": ["` + start.Add(time.Hour).Format(time.RFC3339) + `", "+5m"], "Strategy": "strict"}}`

	failing.Store(true)
	if code, body := postDemands(t, h, doc); code != http.StatusServiceUnavailable || !strings.Contains(body, "could not record") {
		t.Fatalf("POST /demands with its record unwritten: %d %s, want 503", code, body)
	}
	if ds := getDemands(t, h); len(ds) != 0 {
		t.Fatalf("demands after a submission not recorded: %+v", ds)
	}
	f.expectEvents(t, "night ACCEPTED", "night FAILED")

	failing.Store(false)
	if code, body := postDemands(t, h, doc); code != http.StatusOK {
		t.Fatalf("POST /demands again: %d %s", code, body)
	}
	// The plan held nothing for the forgotten one: the same 3 cpus are
	// booked again.
	if d := getDemands(t, h)["night"]; d.State != demand.Accepted || len(d.Placement) != 1 {
		t.Fatalf("submitted again: %+v, want ACCEPTED with a placement", d)
	}
}
