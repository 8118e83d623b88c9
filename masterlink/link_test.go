package masterlink

import (
	"testing"
	"time"
)

// TestLinkParams: the gRPC channel's connection backoff, jitter included,
// stays within ReconnectMax (gRPC's default grows to 2 minutes), each
// attempt is bounded, the Client pings, and the master's enforcement
// policy permits those pings.
func TestLinkParams(t *testing.T) {
	for _, o := range []Options{{}, {ReconnectMin: 100 * time.Millisecond, ReconnectMax: 2 * time.Second, KeepaliveTime: 20 * time.Second, KeepaliveTimeout: time.Second}} {
		o.Master, o.StateDir, o.Runner = "127.0.0.1:1", t.TempDir(), nopRunner{}
		c, err := New(o)
		if err != nil {
			t.Fatal(err)
		}
		p := c.linkParams()
		bo := p.connect.Backoff
		if worst := time.Duration(float64(bo.MaxDelay) * (1 + bo.Jitter)); worst > c.opts.ReconnectMax || worst > 5*time.Second {
			t.Errorf("%+v: channel backoff up to %v, want ≤ ReconnectMax %v ≤ 5 s", o, worst, c.opts.ReconnectMax)
		}
		if bo.BaseDelay != c.opts.ReconnectMin || bo.Multiplier <= 1 || bo.Jitter <= 0 {
			t.Errorf("%+v: channel backoff %+v", o, bo)
		}
		if p.retry.Max != c.opts.ReconnectMax || p.retry.delay(100, 0) > c.opts.ReconnectMax || p.retry.Jitter <= 0 {
			t.Errorf("%+v: session retry %+v", o, p.retry)
		}
		if ct := p.connect.MinConnectTimeout; ct <= 0 || ct > 20*time.Second {
			t.Errorf("%+v: connect timeout %v", o, ct)
		}
		ka := p.keepalive
		if ka.Time != c.opts.KeepaliveTime || ka.Timeout != c.opts.KeepaliveTimeout || ka.Time <= 0 || ka.Timeout <= 0 {
			t.Errorf("%+v: keepalive %+v", o, ka)
		}
		if pol := serverEnforcement(); pol.MinTime > max(ka.Time, 10*time.Second) || pol.MinTime > 10*time.Second || !pol.PermitWithoutStream {
			t.Errorf("server enforcement %+v does not permit pings every %v", pol, ka.Time)
		}
	}
}
