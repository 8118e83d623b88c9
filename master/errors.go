package master

import (
	"errors"
	"fmt"

	"github.com/brimnode/brim/master/allocator"
)

// Sentinel errors. Callers test them with errors.Is; the transport maps
// them to wire codes, in one table (master/transport).
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
	// ErrClosed: the master has been closed.
	ErrClosed = errors.New("master closed")
	// ErrNotLeader: this master does not lead (a standby, or a leader
	// whose etcd session ended): a fenced store write was refused, or
	// the master stopped serving when it lost its leadership.
	ErrNotLeader = errors.New("not the leader")
	// ErrUnavailable: the registry could not record what the call needs
	// kept (a new framework's record while etcd has no quorum): nothing
	// was applied, and the caller may try again.
	ErrUnavailable = errors.New("registry unavailable")
	// ErrFrameworkRemoved: a Subscribe with the ID of a framework the
	// master removed (its failover timeout passed): its tasks were
	// killed, and it may not come back as if they were not (Mesos's
	// "framework has been removed"); it subscribes again without an ID.
	ErrFrameworkRemoved = errors.New("framework removed")
)

// fromAllocator wraps an allocator error in the package's sentinel of the
// same meaning (the allocator's own stays in the chain).
func fromAllocator(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, allocator.ErrNotFound), errors.Is(err, allocator.ErrInsufficient):
		return err // ErrNotFound and ErrInsufficient are the allocator's
	case errors.Is(err, allocator.ErrInvalid), errors.Is(err, allocator.ErrRevocable), errors.Is(err, allocator.ErrExist):
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return err
}
