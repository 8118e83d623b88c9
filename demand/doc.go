// Package demand is the time-aware demand of seed 003: a framework's
// request for Tasks × Resources (all-or-nothing with Gang) with a time
// description (package demand/timespec), its state machine, the Book that
// drives every demand on an injected clock, and Plan, the time-indexed
// plan of future capacity per agent that admits and places demands.
//
//	NEW ──admit──▶ ACCEPTED ──T1−lead──▶ ALLOCATING ──held at T1──▶ ALLOCATED ──claimed──▶ MONITORING ──tasks ended──▶ FINISHED
//	 │                │                      │                        │                        │
//	 └────────────────┴──────────────────────┴────────────────────────┴────────────────────────┴──▶ FAILED (reason)
//
// Each state has one step function (machine.go); a step takes an Event
// and returns the Transition it made, or nil. Nothing here does I/O or
// reads the wall clock: the master and the benchmark's simulator drive it
// with their own clocks and carry out the effects (holds, offers, kills,
// persistence) of the transitions it reports.
//
// Sentinels: ErrInvalid (bad input, naming the field), ErrExist (a
// DemandID already known), ErrNotFound, ErrNeverFits (larger than the
// cluster), ErrNoFit (the plan cannot hold it in its window).
package demand
