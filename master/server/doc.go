// Package server assembles a whole master from a Config — its store
// (master/boltstore in a state dir, or a highly available master's
// term on master/etcdstore), credentials, TLS and listener — and runs
// its loops, its transport (master/transport), backups, the reloader
// and systemd's notifications until the context ends (Start, then
// Running.Wait). With an Elector the master serves as a standby until
// elected (ha.go) and each term gets a Master of its own, loaded
// through the term's fenced store; a term that ends stops the master
// with ErrLostLeadership.
//
// It is the one assembly path (brim master, brim dev, the benchmarks):
// cmd/brim maps flags onto a Config. It holds no domain logic and
// serves nothing itself.
//
// Sentinel: ErrLostLeadership.
package server
