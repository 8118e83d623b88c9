// Package discovery finds a highly available master cluster's masters
// for its clients: --master etcd://HOST:2379[,…]/PREFIX names the etcd
// where the masters campaign (master/etcdstore), and Discover lists
// them, the live leader first; any other --master is a list of
// addresses and needs no discovery. It holds the parts of the etcd
// layout clients read (ParseURL, ElectionPrefix) and etcd's client TLS
// and password files (LoadTLS, ReadPassword), so that the client
// commands (cli), agents and frameworks link the etcd client and no
// master code: no domain, no allocator, no bbolt, no etcd server.
//
// Sentinel: ErrNoMasters.
package discovery
