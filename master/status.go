package master

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/brimnode/brim/master/allocator"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// wireCodes maps the package's sentinels to the gRPC code and the HTTP
// status the boundaries answer with; the first match wins. The domain
// wraps every error of the packages below it (allocator, resources) in
// one of these sentinels (fromAllocator, ErrInvalid around parse
// errors), so this table is the only place that picks a wire code.
// HTTP codes follow Mesos's operator API: an unknown agent is a bad
// argument (400), resources not free or not reserved a conflict (409).
var wireCodes = []struct {
	err  error
	grpc codes.Code
	http int
}{
	{ErrUnauthenticated, codes.Unauthenticated, http.StatusUnauthorized},
	{ErrForbidden, codes.PermissionDenied, http.StatusForbidden},
	{ErrInvalid, codes.InvalidArgument, http.StatusBadRequest},
	{ErrStaleOffer, codes.FailedPrecondition, http.StatusConflict},
	{ErrConflict, codes.FailedPrecondition, http.StatusConflict},
	{ErrNotFound, codes.NotFound, http.StatusBadRequest},
	{ErrInsufficient, codes.ResourceExhausted, http.StatusConflict},
	{ErrClosed, codes.Unavailable, http.StatusServiceUnavailable},
	{ErrNotLeader, codes.Unavailable, http.StatusServiceUnavailable},
}

// toStatus is err as a gRPC status (codes.Internal for an error that
// wraps none of the sentinels).
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	c := codes.Internal
	for _, w := range wireCodes {
		if errors.Is(err, w.err) {
			c = w.grpc
			break
		}
	}
	return status.Error(c, err.Error())
}

// httpStatus is the HTTP status of err: 413 for a body over the limit,
// else the sentinel's, else 500.
func httpStatus(err error) int {
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return http.StatusRequestEntityTooLarge
	}
	for _, w := range wireCodes {
		if errors.Is(err, w.err) {
			return w.http
		}
	}
	return http.StatusInternalServerError
}

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
