// Package transport serves the master's domain (package master) on the
// wire, as containerd's service.go serves its local.go: the AgentLink
// and Scheduler gRPC services of masterlinkpb (grpc.go), the operator
// HTTP API (http.go, demands_http.go) with /health, /version and
// /metrics (metrics.go: the domain's plain figures exposed for
// Prometheus), one port for both (serve.go: HTTP/2 to gRPC, the rest to
// HTTP, sniffed after TLS: tls.go), operators', frameworks' and agents'
// authentication and ACLs (auth.go, rpcauth.go, reload.go), every
// conversion between protobuf and domain values (convert.go) and the
// one table from the domain's sentinels to gRPC codes and HTTP statuses
// (status.go). A highly available master serves through a Gate
// (gate.go): the leading term's API, or a standby's answers naming the
// leader.
//
// API is one Master's transport; its handlers authenticate, convert,
// call the domain and map its error once. It never opens a store, never
// decides what the domain decides, and the domain never imports it.
//
// Sentinels are the domain's (master.ErrInvalid, …); a body over
// MaxBodyBytes is *http.MaxBytesError (413).
package transport
