package transport

import (
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"net/http"
	"os"

	"github.com/brimnode/brim/master"
)

// Operator actions an Authorizer decides on.
const (
	ActionReserve           = "reserve"
	ActionUnreserve         = "unreserve"
	ActionSetQuota          = "set_quota"
	ActionSetWeight         = "set_weight"
	ActionRegisterFramework = "register_framework"
	// ActionRegisterAgent lets a principal register agents (with
	// Options.AuthenticateAgents); it has no role: a rule's roles are not
	// looked at.
	ActionRegisterAgent = "register_agent"
	// ActionRunAsRoot lets a principal launch tasks that run as root
	// (uid 0) on the agent, for a role. Unlike the other actions it is
	// never allowed by default: only a rule naming it allows it (not the
	// absence of an ACL file, not Permissive). A task in a user namespace
	// (TaskInfo.userns) needs none: its root is unprivileged on the host.
	ActionRunAsRoot = "run_as_root"
	// ActionExecTasks lets a principal run processes in the running tasks
	// of frameworks it did not subscribe, for the tasks' roles (an
	// operator's debugging access). A framework's own principal needs none
	// for its tasks. Like ActionRunAsRoot it is allowed only by a rule that
	// names it: not by the absence of an ACL file, not by Permissive.
	ActionExecTasks = "exec_tasks"
	// ActionSubmitDemand lets a principal submit and cancel demands for a
	// role.
	ActionSubmitDemand = "submit_demand"
)

// Authorizer authenticates operators (HTTP), frameworks and agents (gRPC) and
// decides what a principal may do. Implemented by *FileAuth.
type Authorizer interface {
	// Authenticate returns the request's principal; errors wrap
	// ErrUnauthenticated.
	Authenticate(r *http.Request) (string, error)
	// AuthenticateSecret checks a principal's secret (a framework's or an
	// agent's per-RPC credentials); errors wrap ErrUnauthenticated.
	AuthenticateSecret(principal, secret string) error
	// Authorize errors wrap ErrForbidden when principal may not do action
	// for role ("" for an action without a role, ActionRegisterAgent).
	Authorize(principal, action, role string) error
}

// Credential is one principal and its secret.
type Credential struct {
	Principal string `json:"principal"`
	Secret    string `json:"secret"`
}

// ACLRule allows principals an action for roles; "ANY" matches everything.
type ACLRule struct {
	Principals []string `json:"principals"`
	Action     string   `json:"action"`
	Roles      []string `json:"roles"`
}

// ACLs are the rules; with Permissive, an action no rule names is allowed.
type ACLs struct {
	Permissive bool      `json:"permissive"`
	Rules      []ACLRule `json:"rules"`
}

// FileAuth is HTTP basic authentication against a credentials file, and
// ACL rules. Immutable after LoadAuth; safe for concurrent use.
type FileAuth struct {
	creds map[string]string
	acls  *ACLs
}

var _ Authorizer = (*FileAuth)(nil)

// LoadAuth reads a credentials file (JSON list of Credential) and an
// optional ACL file (JSON ACLs; empty path: everything allowed).
func LoadAuth(credentialsPath, aclPath string) (*FileAuth, error) {
	var creds []Credential
	if err := readJSON(credentialsPath, &creds); err != nil {
		return nil, fmt.Errorf("read credentials: %w", err)
	}
	a := &FileAuth{creds: map[string]string{}}
	for _, c := range creds {
		if c.Principal == "" {
			return nil, fmt.Errorf("read credentials %s: empty principal: %w", credentialsPath, master.ErrInvalid)
		}
		a.creds[c.Principal] = c.Secret
	}
	if aclPath != "" {
		a.acls = &ACLs{}
		if err := readJSON(aclPath, a.acls); err != nil {
			return nil, fmt.Errorf("read acls: %w", err)
		}
	}
	return a, nil
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// Authenticate checks HTTP basic credentials.
func (a *FileAuth) Authenticate(r *http.Request) (string, error) {
	p, s, ok := r.BasicAuth()
	if !ok {
		return "", fmt.Errorf("no credentials: %w", master.ErrUnauthenticated)
	}
	if err := a.AuthenticateSecret(p, s); err != nil {
		return "", err
	}
	return p, nil
}

// AuthenticateSecret checks secret against the credentials file, in
// constant time for a known principal. The error says whether the
// principal is unknown or the secret wrong (as an operator needs to fix
// it; it tells a client which principals exist).
func (a *FileAuth) AuthenticateSecret(principal, secret string) error {
	want, known := a.creds[principal]
	if !known {
		return fmt.Errorf("bad credentials for %q: unknown principal: %w", principal, master.ErrUnauthenticated)
	}
	if subtle.ConstantTimeCompare([]byte(secret), []byte(want)) != 1 {
		return fmt.Errorf("bad credentials for %q: wrong secret: %w", principal, master.ErrUnauthenticated)
	}
	return nil
}

// explicitOnly reports whether action is allowed only by a rule that
// names it (never by default nor by Permissive): root on an agent, and
// processes in other frameworks' tasks.
func explicitOnly(action string) bool { return action == ActionRunAsRoot || action == ActionExecTasks }

// Authorize applies the ACL rules. ActionRunAsRoot and ActionExecTasks are
// allowed only by a rule that names them.
func (a *FileAuth) Authorize(principal, action, role string) error {
	if a.acls == nil {
		if explicitOnly(action) {
			return fmt.Errorf("principal %q may not %s for role %q: no ACL file (--acls) allows it: %w", principal, action, role, master.ErrForbidden)
		}
		return nil
	}
	named := false
	for _, r := range a.acls.Rules {
		if r.Action != action {
			continue
		}
		named = true
		if matches(r.Principals, principal) && (action == ActionRegisterAgent || matches(r.Roles, role)) {
			return nil
		}
	}
	if !named && a.acls.Permissive && !explicitOnly(action) {
		return nil
	}
	if role == "" {
		return fmt.Errorf("principal %q may not %s: %w", principal, action, master.ErrForbidden)
	}
	return fmt.Errorf("principal %q may not %s for role %q: %w", principal, action, role, master.ErrForbidden)
}

func matches(list []string, v string) bool {
	for _, x := range list {
		if x == "ANY" || x == v {
			return true
		}
	}
	return false
}
