// Package cliout prints what brim's commands show: the tables and JSON of
// containers, their statistics, the agent's info and explanation (from
// agentpb and agentclient's views), and the master's state, quota and
// weights (master/api). cmd/brim fetches, cliout formats: the layout of
// every table lives here, one function per table.
//
// Functions write to the io.Writer they are given and return its error
// (a tabwriter's Flush); they never exit, log or call an API. It owns no
// goroutines and no state.
package cliout
