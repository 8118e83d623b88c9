package transport

import (
	"net/http"
	"sync/atomic"
)

// ReloadableAuth is the Authorizer of a credentials file and an optional
// ACL file that can be read again while the master runs (`brim master`
// does on SIGHUP): secrets rotate and principals come and go without a
// restart. Each call uses the files as last loaded in full; a reload that
// fails keeps the previous ones. Safe for concurrent use.
type ReloadableAuth struct {
	credentials, acls string
	cur               atomic.Pointer[FileAuth]
}

var _ Authorizer = (*ReloadableAuth)(nil)

// NewReloadableAuth loads the files (see LoadAuth, whose errors it
// returns).
func NewReloadableAuth(credentialsPath, aclPath string) (*ReloadableAuth, error) {
	r := &ReloadableAuth{credentials: credentialsPath, acls: aclPath}
	if err := r.Reload(); err != nil {
		return nil, err
	}
	return r, nil
}

// Reload reads the files again; on an error (wrapping ErrInvalid for a
// bad entry) the previous credentials and ACLs stay in force.
func (r *ReloadableAuth) Reload() error {
	a, err := LoadAuth(r.credentials, r.acls)
	if err != nil {
		return err
	}
	r.cur.Store(a)
	return nil
}

// Principals returns how many principals the credentials in force name.
func (r *ReloadableAuth) Principals() int { return len(r.cur.Load().creds) }

// Authenticate implements Authorizer.
func (r *ReloadableAuth) Authenticate(req *http.Request) (string, error) {
	return r.cur.Load().Authenticate(req)
}

// AuthenticateSecret implements Authorizer.
func (r *ReloadableAuth) AuthenticateSecret(principal, secret string) error {
	return r.cur.Load().AuthenticateSecret(principal, secret)
}

// Authorize implements Authorizer.
func (r *ReloadableAuth) Authorize(principal, action, role string) error {
	return r.cur.Load().Authorize(principal, action, role)
}
