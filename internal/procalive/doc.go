// Package procalive tells whether a process still runs (it exists and is
// not a zombie) and which process listens behind a unix socket
// (PeerPID). The agent uses them to tell a dead agent's leftovers — a
// listening socket, a lock that a child forked just before a kill -9
// still holds for the moment before its exec — from a live agent's.
package procalive
