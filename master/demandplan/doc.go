// Package demandplan carries out time-aware demands (package demand) on
// the master's allocator: the one code path between a demand's Book and
// the DRF allocator, which the master and the demand benchmark both call.
//
// A Planner owns the Book and the links between demands and what the
// allocator has for them: the holds that keep planned capacity from DRF,
// the offers that hand it over, the tasks launched on them. Each
// allocation cycle (Cycle, then TopUp, before DRF's Allocate) it steps
// the demands on the clock it is given, holds what frees on planned
// agents, hands held capacity over at the start, lends capacity held
// ahead of a start as revocable resources until ReclaimAhead before it
// (Options.Lend), and, at a strict start whose booked capacity others
// still hold, reclaims it (Options.Preempt): revocable work first, then
// DRF offers, then tasks of roles above their quota guarantee, youngest
// first — never a role's guarantee, a reservation or a demand's tasks —
// on the agent where that throws away the least work (rebind). A loose
// start that is late reclaims the same way, but only work younger than
// a few times its wait.
//
// It does no I/O and reads no clock: it changes the allocator it is
// given and returns Effects (offers to make, offers to withdraw, tasks to
// kill, demands to store and report) for the driver to carry out. What it
// needs of the cluster (agents, frameworks, their tasks and offers) it
// asks through Cluster, which the driver implements: the master over its
// registry, the benchmark over simulated agents.
//
// A Planner is not safe for concurrent use: the master calls it under its
// lock.
//
// Sentinels: those of package demand (ErrInvalid, ErrExist, ErrNotFound,
// ErrNoFit, ErrHandedOver), returned wrapped.
package demandplan
