package masterlink

import (
	"context"
	"encoding/base64"
	"errors"
	"sync/atomic"

	"google.golang.org/grpc/credentials"
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
	return BasicCredentials(r.principal, r.secret.Get()).GetRequestMetadata(ctx, uri...)
}

func (rotatingAuth) RequireTransportSecurity() bool { return false }

// BasicCredentials returns per-RPC credentials that send
// "authorization: Basic base64(principal:secret)" with every call, as
// the master's agent and framework authentication expects. They do not
// require transport security: without TLS the secret crosses the network
// in clear text.
func BasicCredentials(principal, secret string) credentials.PerRPCCredentials {
	return basicAuth{header: "Basic " + base64.StdEncoding.EncodeToString([]byte(principal+":"+secret))}
}

// basicAuth is BasicCredentials.
type basicAuth struct{ header string }

// GetRequestMetadata implements credentials.PerRPCCredentials.
func (b basicAuth) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": b.header}, nil
}

// RequireTransportSecurity implements credentials.PerRPCCredentials:
// false, since the master serves TLS only when its operator gives it a
// certificate (brim master --tls-cert).
func (basicAuth) RequireTransportSecurity() bool { return false }
