package master

import (
	"context"
	"fmt"
	"testing"
)

// TestOffersBatched: a cycle that offers a framework more agents than fit
// one event sends several Offers events, each of at most
// maxOffersPerEvent offers, which together hold every offer once. (Each
// is well under gRPC's 4 MiB default on the wire: the transport's
// TestOffersEventSize.)
func TestOffersBatched(t *testing.T) {
	m, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	n := 2*maxOffersPerEvent + 17
	for i := 0; i < n; i++ {
		_, _, err := m.registerAgent((&Registration{Hostname: fmt.Sprintf("host-%05d", i), Resources: "cpus:16;mem:65536"}), "", NewOutbox[ToAgent](cancel, AgentQueue))
		if err != nil {
			t.Fatal(err)
		}
	}
	fwOut := NewOutbox[ToFramework](cancel, FrameworkQueue)
	if _, err := m.Subscribe(&Subscription{Info: &FrameworkInfo{Name: "big"}}, fwOut); err != nil {
		t.Fatal(err)
	}
	m.allocate()
	seen := map[string]bool{}
	events := 0
	for _, ev := range fwOut.Take() {
		made, ok := ev.(*OffersMade)
		if !ok {
			continue
		}
		events++
		if len(made.offers) > maxOffersPerEvent {
			t.Errorf("event of %d offers, want at most %d", len(made.offers), maxOffersPerEvent)
		}
		for _, o := range made.offers {
			if seen[o.id] {
				t.Errorf("offer %s sent twice", o.id)
			}
			seen[o.id] = true
		}
	}
	if len(seen) != n || events != 3 {
		t.Fatalf("%d offers in %d events, want %d in 3", len(seen), events, n)
	}
}
