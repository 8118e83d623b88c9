// Package boltstore is the master's store (master.Store) in one bbolt
// file, STATE-DIR/master.db, for a master without etcd: one bucket per
// record family, each record encoded by master/record as etcd's are.
// The file is checked before it is mapped (a file cut short would fault
// the process: storesize.go) and by bbolt's consistency check, bbolt's
// panics become errors naming the file and how to recover it; backups
// are consistent copies written atomically (backup.go), and Restore
// puts one back under a stopped master.
//
// It never serves and never decides: the master calls it, outside its
// lock.
//
// Sentinels: ErrCorruptStore, ErrStoreBusy (never on the wire).
package boltstore
