// Package client is the Go client of the master's operator HTTP API
// (/state, /reserve, /unreserve, /quota, /weights), used by brim state,
// reserve, unreserve, quota and weights. It owns no goroutines; a Client
// is safe for concurrent use.
//
// Errors: a request the master answered with another status than 200 is
// an *APIError (the master's message and the status); a master that could
// not be reached wraps ErrUnreachable, and additionally ErrServesTLS when
// the address answers a TLS handshake though the client was given no TLS
// configuration (brim's --master-ca missing). ServesTLS is that probe on
// its own, for other clients of the master (brim run's gRPC connection).
package client
