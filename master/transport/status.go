package transport

import (
	"errors"
	"net/http"

	"github.com/brimnode/brim/master"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// wireCodes maps the domain's sentinels to the gRPC code and the HTTP
// status the transport answers with; the first match wins. The domain
// wraps every error of the packages below it (allocator, resources) in
// one of these sentinels (its fromAllocator, ErrInvalid around parse
// errors), so this table is the only place that picks a wire code.
// HTTP codes follow Mesos's operator API: an unknown agent is a bad
// argument (400), resources not free or not reserved a conflict (409).
var wireCodes = []struct {
	err  error
	grpc codes.Code
	http int
}{
	{master.ErrUnauthenticated, codes.Unauthenticated, http.StatusUnauthorized},
	{master.ErrForbidden, codes.PermissionDenied, http.StatusForbidden},
	{master.ErrInvalid, codes.InvalidArgument, http.StatusBadRequest},
	{master.ErrStaleOffer, codes.FailedPrecondition, http.StatusConflict},
	{master.ErrConflict, codes.FailedPrecondition, http.StatusConflict},
	{master.ErrNotFound, codes.NotFound, http.StatusBadRequest},
	{master.ErrInsufficient, codes.ResourceExhausted, http.StatusConflict},
	{master.ErrClosed, codes.Unavailable, http.StatusServiceUnavailable},
	{master.ErrNotLeader, codes.Unavailable, http.StatusServiceUnavailable},
	{master.ErrUnavailable, codes.Unavailable, http.StatusServiceUnavailable},
	{master.ErrFrameworkRemoved, codes.FailedPrecondition, http.StatusConflict},
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
