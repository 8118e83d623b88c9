// Package record is the encoding of the master's persisted records (its
// master.Persisted), written once for every store: master/boltstore
// keeps each family in a bucket of its name, master/etcdstore under
// PREFIX/registry/FAMILY/ID. A record reads the same in both, and a
// record of an older master (an agent's bare hostname, a framework's
// bare list of roles) reads in a newer one.
//
// It never opens a store, and knows nothing of where a store keeps a
// family: that is each store's.
//
// Sentinel: ErrUnknownFamily.
package record
