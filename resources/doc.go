// Package resources is brim's resource model, shared by the agent and the
// master: Mesos's text syntax, exact fixed-point arithmetic, and validation.
//
// It owns the Resources value type and its text form. It never does I/O,
// never logs, and knows nothing of agents, tasks or cgroups: callers turn
// Resources into cgroup limits, offers or allocations.
//
// # Text syntax
//
//	resources := [ resource { ";" resource } ]
//	resource  := name [ "(" role [ "," principal ] ")" ] [ "{REV}" ] ":" value
//	value     := scalar | "[" [ range { "," range } ] "]" | "{" [ item { "," item } ] "}"
//	range     := uint [ "-" uint ]              (inclusive; "80" means 80-80)
//	scalar    := decimal with at most 3 fractional digits, e.g. 2, 1.5, .25
//
// Examples: "cpus:2;mem:1024;disk:512;ports:[31000-32000];cpus(hdfs):1",
// "disks:{sda,sdb}", "cpus(hdfs,alice):2" (dynamically reserved for role
// hdfs by principal alice), "cpus{REV}:0.5" (revocable). Whitespace around
// tokens is ignored; empty tokens ("cpus:1;") are skipped. Repeated entries
// of one (name, role, reservation, revocable) add up; their ranges or set
// items must not overlap. One name may not be used with two types.
//
// Names are [A-Za-z0-9_./-]+. Well-known scalars: cpus, mem (MiB), disk
// (MiB), net_bw (Mbit/s); ranges: ports. Roles follow Mesos: "*" is
// unreserved; a role name is printable ASCII, not "." or "..", not starting
// with "-", without whitespace, "/", "*" or any of "(),;:{}[]". Principals
// and set items are printable ASCII without whitespace or "(),;:{}[]".
//
// # Reservations and revocable resources
//
// A resource with role "*" is unreserved. A role name without a principal
// is a static reservation (made by the agent's configuration); with a
// principal it is a dynamic reservation (made by a RESERVE operation, see
// Resources.Reserve and Resources.Unreserve). Revocable ({REV}) resources
// are oversubscribed capacity that may be taken back at any time: they are
// always unreserved, and a task may not mix revocable and non-revocable
// resources of the same name (ValidateTask).
//
// # Fixed point
//
// Scalars are Values: int64 thousandths, like Mesos's three-decimal
// rounding, so sums and differences are exact. Text with more than three
// decimals is rejected rather than rounded (an operator should see that
// 0.0005 cpus is nothing); FromFloat rounds, for values computed by
// estimators.
//
// # Values and encoding
//
// Resources is an immutable value type, safe for concurrent reads: every
// method returns a new value and never modifies its receiver or arguments.
// Literals need not be normalized (an empty Role reads as "*"); results
// are. Resources implements encoding.TextMarshaler and TextUnmarshaler with
// the text syntax, so it encodes as a string in JSON and can back a flag.
//
// # Errors
//
// Every parse and validation error wraps ErrInvalid; Parse returns
// *ParseError naming the offending token, Validate and ValidateTask return
// *ValidationError naming the offending resource. More specific sentinels:
// ErrRevocableReservation (reserving revocable resources) and
// ErrMixedRevocable (ValidateTask).
package resources
