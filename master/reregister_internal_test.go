package master

import (
	"testing"
	"time"

	"github.com/brimnode/brim/masterlink"
)

// The default window outlasts an agent's whole reconnect backoff: with the
// chaos harness's 2 s heartbeat timeout it was 2 s, and agents that waited
// out their backoff (up to 5 s) after a master restart found their running
// tasks answered LOST, then brought them back (seed 2611).
func TestReregistrationWindow(t *testing.T) {
	for _, tc := range []struct {
		opts Options
		want time.Duration
	}{
		{Options{HeartbeatInterval: 200 * time.Millisecond, MaxMissedHeartbeats: 10}, MinReregistrationWindow},
		{Options{HeartbeatInterval: 15 * time.Second, MaxMissedHeartbeats: 5}, 75 * time.Second},
		{Options{HeartbeatInterval: 200 * time.Millisecond, MaxMissedHeartbeats: 10, ReregistrationTimeout: time.Second}, time.Second},
	} {
		m := &Master{opts: tc.opts}
		if got := m.reregistrationWindow(); got != tc.want {
			t.Errorf("window of %+v = %v, want %v", tc.opts, got, tc.want)
		}
	}
	if MinReregistrationWindow < 10*time.Second {
		t.Errorf("MinReregistrationWindow %v: shorter than twice the agents' 5 s reconnect backoff", MinReregistrationWindow)
	}
}

// TestMinReregistrationWindow: the window's floor is twice masterlink's
// longest reconnect backoff, which the domain does not import.
func TestMinReregistrationWindow(t *testing.T) {
	if want := 2 * masterlink.DefaultReconnectMax; MinReregistrationWindow != want {
		t.Errorf("MinReregistrationWindow = %v, want twice masterlink.DefaultReconnectMax: %v", MinReregistrationWindow, want)
	}
}
