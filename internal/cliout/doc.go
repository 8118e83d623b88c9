// Package cliout prints what brim's commands show: the tables and JSON of
// containers, their statistics, the agent's info and explanation (from
// agentpb and agentclient's views), and the master's state, quota and
// weights (master/api). cmd/brim fetches, cliout formats: the layout of
// every table lives here, one function per table. Tables are Go templates
// over rows of strings, so --format (Docker's: a template, "table …",
// json) sees what the default table shows (format.go); Frame draws a
// full-screen view in place (screen.go).
//
// Functions write to the io.Writer they are given and return its error
// (a tabwriter's Flush); they never exit, log or call an API. It owns no
// goroutines and no state.
package cliout
