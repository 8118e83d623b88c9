// Package speclimit holds the bounds on what a container or task spec may
// carry — its command, environment and labels — and the byte budget of the
// pages that list or report many of them. One place, so that the agent
// (at launch, for its local API and the master's tasks) and the master (at
// ACCEPT, answering INVALID_TASK) refuse the same specs with the same words.
//
// The bounds exist for two reasons. The kernel refuses an exec whose single
// argument or environment string is longer than MAX_ARG_STRLEN, or whose
// strings and pointers together pass a quarter of the stack limit (ARG_MAX):
// such a container would start and end with exit 255 and no reason. And
// every gRPC message must stay well below gRPC's 4 MiB default: a bounded
// spec, together with pages bounded by PageBytes, keeps any list or
// re-registration message independent of the number of tasks.
//
// The package only computes; it never logs. Check returns errors wrapping
// ErrTooLarge.
package speclimit
