package master

import "testing"

// TestGateWakesHeldStreamsForALeaderOnly: the streams a standby holds
// wait for a leader to name or for its own election; a change to no
// leader or to this master itself (the expiry of a dead leader's key
// names it a moment before it is elected) does not wake them — 50,000
// held streams woken cost half a second of CPU while the election
// loaded the registry.
func TestGateWakesHeldStreamsForALeaderOnly(t *testing.T) {
	g := &gate{self: "10.0.0.2:5050", changed: make(chan struct{})}
	for _, c := range []struct {
		leader string
		wake   bool
	}{
		{"10.0.0.1:5050", true},  // another master: named at once
		{"10.0.0.1:5050", false}, // the same again
		{"", false},              // its key expired: still none to name
		{"10.0.0.2:5050", false}, // this master: they wait for lead
		{"10.0.0.3:5050", true},
	} {
		held := g.changed
		g.setLeader(c.leader)
		select {
		case <-held:
			if !c.wake {
				t.Errorf("setLeader(%q) woke the held streams", c.leader)
			}
		default:
			if c.wake {
				t.Errorf("setLeader(%q) left the held streams waiting", c.leader)
			}
		}
	}
	held := g.changed
	g.lead(nil, nil)
	select {
	case <-held:
	default:
		t.Error("lead left the held streams waiting")
	}
}
