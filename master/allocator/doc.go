// Package allocator is the master's resource allocation module: Apache
// Mesos's hierarchical DRF allocator (roles with weights and quota, static
// and dynamic reservations, refusal filters, suppress/revive, revocable
// resources only for frameworks with the capability), the random sorter,
// and meDRF (machine-performance-weighted DRF, seed 002) as an option; plus
// ProgressiveFill and FairShares, task-level DRF on plain vectors.
//
// It owns the in-memory allocation model (agents, frameworks, roles,
// allocations, filters) and computes offers. It never does I/O, never
// logs, never launches or kills anything and never talks to agents or
// frameworks: the master feeds it events and turns its offers into
// messages. Time comes from an injected Clock.
//
// An Allocator is not safe for concurrent use; the master serializes calls.
//
// Internally, resource names are interned into fixed vectors of int64
// thousandths so one cycle over 50,000 agents runs without maps, strings or
// per-agent allocations; resources.Resources appear only at the API
// boundary. See docs/allocator.md for the algorithm, the options, where the
// seeds were interpreted, and the benchmark figures.
//
// The files follow the events: agents.go (agents come, change their
// totals or revocable estimate, go), frameworks.go (frameworks, suppress,
// revive), recover.go (offers declined or rescinded and tasks ended, with
// refusal filters), reservations.go, roles.go (weights and quota),
// cycle.go (Allocate: the walk and the offers), sorter.go and share.go
// (sorter keys, exact shares), heap.go, ledger.go (moving resources
// between agents and clients), shares.go (reports). Scenarios live as
// scripts in testdata/*.txt, one file per family.
//
// Sentinels: ErrNotFound, ErrExist, ErrInsufficient, ErrRevocable,
// ErrInvalid.
package allocator
