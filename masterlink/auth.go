package masterlink

import (
	"context"
	"errors"
	"sync/atomic"

	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
)

// ErrRejected: the master refused the agent's first registration as
// unauthenticated or not permitted (codes.Unauthenticated or
// PermissionDenied); the error also carries the master's status.
var ErrRejected = errors.New("registration rejected")

// Secret is a principal's secret that may change while links use it (an
// agent's SIGHUP reload reads its --secret-file again): every stream
// opened after Set carries the new one; streams already open stay
// authenticated as they were. Safe for concurrent use.
type Secret struct{ v atomic.Pointer[string] }

// NewSecret returns a Secret holding s.
func NewSecret(s string) *Secret {
	var x Secret
	x.Set(s)
	return &x
}

// Set replaces the secret.
func (s *Secret) Set(v string) { s.v.Store(&v) }

// Get returns the secret ("" for nil or the zero Secret).
func (s *Secret) Get() string {
	if s == nil {
		return ""
	}
	if p := s.v.Load(); p != nil {
		return *p
	}
	return ""
}

// rotatingAuth sends principal and the Secret in force with every call.
type rotatingAuth struct {
	principal string
	secret    *Secret
}

func (r rotatingAuth) GetRequestMetadata(ctx context.Context, uri ...string) (map[string]string, error) {
	return pb.BasicCredentials(r.principal, r.secret.Get()).GetRequestMetadata(ctx, uri...)
}

func (rotatingAuth) RequireTransportSecurity() bool { return false }
