package master

import (
	"errors"

	"github.com/brimnode/brim/master/allocator"
)

// Sentinel errors. Callers test them with errors.Is; the gRPC and HTTP
// boundaries map them to wire codes.
var (
	// ErrInvalid: a malformed request (bad resources, task ID, operation).
	ErrInvalid = errors.New("invalid argument")
	// ErrNotFound: an unknown framework, agent, task or offer. It is
	// allocator.ErrNotFound (one "not found" for the master's layers).
	ErrNotFound = allocator.ErrNotFound
	// ErrStaleOffer: an offer ID that is forged, was rescinded or already
	// used, or belongs to another framework.
	ErrStaleOffer = errors.New("unknown or stale offer")
	// ErrInsufficient: the operation asks for more than available. It is
	// allocator.ErrInsufficient (wrapping one in the other said
	// "insufficient resources" twice).
	ErrInsufficient = allocator.ErrInsufficient
	// ErrUnauthenticated and ErrForbidden: authentication and ACL failures
	// of the operator API and of frameworks.
	ErrUnauthenticated = errors.New("unauthenticated")
	ErrForbidden       = errors.New("not permitted")
	// ErrConflict: the task's state does not allow the call (a resource
	// update of a task that is not running, or while another is in
	// flight).
	ErrConflict = errors.New("conflicting task state")
	// ErrCorruptStore: the store file cannot be used as it is (bbolt found
	// damaged pages, or the file is empty); the error names the file and
	// the commands that recover it.
	ErrCorruptStore = errors.New("master store unusable")
	// ErrStoreBusy: another process (a running master) holds the store.
	ErrStoreBusy = errors.New("master store in use")
	// ErrClosed: the master has been closed.
	ErrClosed = errors.New("master closed")
	// ErrNotLeader: this master does not lead (a standby, or a leader
	// whose etcd session ended): a fenced store write was refused, or
	// the master stopped serving when it lost its leadership.
	ErrNotLeader = errors.New("not the leader")
)
