// Package etcdstore keeps a highly available master's registry in etcd
// and elects its leader there: agents, frameworks (with principals),
// dynamic reservations, quota and weights under PREFIX/registry/, the
// election under PREFIX/election (concurrency.Election on a session with
// a TTL). Every write is a transaction conditioned on the leader's
// election key still existing with the create revision it won with, so a
// deposed leader (its session expired, another elected) can never write:
// its writes fail with ErrNotLeader, as do the writes still waiting on
// etcd when a term ends. A standby retries its session within a second
// of etcd's answer and ends the election keys of its own address left by
// an earlier session (a restart). Records are encoded by master/record,
// as bbolt's are; the election's key layout is master/discovery's, which
// clients read to find the masters.
//
// The master declares what it needs (master.Elector, master.Term,
// master.Store); cmd/brim opens a Client from --store etcd://… and hands
// it to master/server. Tests run etcd in-process (server/v3/embed, test
// code only).
package etcdstore
