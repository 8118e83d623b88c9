package qos

import (
	"context"
	"errors"
	"fmt"
)

// ErrCorrectionsInForce is returned by Switch.Replace while corrections
// are in force: the controller that made them is the only one that knows
// when to lift them (a new one starts without their baselines), so it
// stays until they are lifted.
var ErrCorrectionsInForce = errors.New("qos corrections in force")

// Switch replaces the controller of a running Run loop (an agent's
// reload). The loop makes the change between rounds, so a controller is
// never replaced during its Corrections call or between it and the
// corrections' application. Create one with NewSwitch and give it to Run
// in LoopConfig.Switch.
type Switch struct {
	reqs chan swapRequest
}

type swapRequest struct {
	c     Controller
	reply chan swapReply
}

type swapReply struct {
	old Controller
	err error
}

// NewSwitch returns a Switch for one Run loop.
func NewSwitch() *Switch { return &Switch{reqs: make(chan swapRequest)} }

// Replace makes c the loop's controller and returns the one it replaced,
// which the caller closes. It fails with ErrCorrectionsInForce (c is not
// taken) while the loop's applier has corrections in force (a slow
// start's limits are lifted instead), and with
// ctx's error when the loop does not take the request before ctx ends
// (the loop is not running).
func (s *Switch) Replace(ctx context.Context, c Controller) (Controller, error) {
	if c == nil {
		return nil, errors.New("qos: replace the controller with nil")
	}
	r := swapRequest{c: c, reply: make(chan swapReply, 1)}
	select {
	case s.reqs <- r:
	case <-ctx.Done():
		return nil, fmt.Errorf("replace the qos controller: the loop is not running: %w", ctx.Err())
	}
	rep := <-r.reply // the loop answers at once
	return rep.old, rep.err
}

// take answers r for a loop whose controller is cur and whose applier is
// a; it returns the loop's controller from now on and whether that is
// r's. A slow start's limits do not hold the old controller (idle
// revocable work stays parked, so a reload would never be taken): they
// are lifted first, and the new controller parks work anew if it has a
// slow start.
func (r swapRequest) take(ctx context.Context, cur Controller, a *Applier) (Controller, bool) {
	var held, lifts []Correction
	for _, c := range a.Active() {
		if !slowStarted(c) {
			held = append(held, c)
			continue
		}
		lift := Correction{Type: Unthrottle, ContainerID: c.ContainerID, Trigger: c.Trigger, Reason: "controller replaced: lifting its slow start"}
		if c.Type == ThrottleIO {
			lift.Type = UnthrottleIO
		}
		lifts = append(lifts, lift)
	}
	if len(held) > 0 {
		r.reply <- swapReply{err: fmt.Errorf("%w: %d (e.g. %s); the controller that made them stays until it lifts them", ErrCorrectionsInForce, len(held), held[0])}
		return cur, false
	}
	if len(lifts) > 0 {
		if err := a.Apply(ctx, lifts); err != nil {
			r.reply <- swapReply{err: fmt.Errorf("replace the qos controller: lifting the slow start's limits: %w", err)}
			return cur, false
		}
	}
	r.reply <- swapReply{old: cur}
	return r.c, true
}
