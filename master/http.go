package master

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"

	"github.com/brimnode/brim/master/allocator"
	"github.com/brimnode/brim/resources"
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
			return nil, fmt.Errorf("read credentials %s: empty principal: %w", credentialsPath, ErrInvalid)
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
		return "", fmt.Errorf("no credentials: %w", ErrUnauthenticated)
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
		return fmt.Errorf("bad credentials for %q: unknown principal: %w", principal, ErrUnauthenticated)
	}
	if subtle.ConstantTimeCompare([]byte(secret), []byte(want)) != 1 {
		return fmt.Errorf("bad credentials for %q: wrong secret: %w", principal, ErrUnauthenticated)
	}
	return nil
}

// Authorize applies the ACL rules.
func (a *FileAuth) Authorize(principal, action, role string) error {
	if a.acls == nil {
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
	if !named && a.acls.Permissive {
		return nil
	}
	if role == "" {
		return fmt.Errorf("principal %q may not %s: %w", principal, action, ErrForbidden)
	}
	return fmt.Errorf("principal %q may not %s for role %q: %w", principal, action, role, ErrForbidden)
}

func matches(list []string, v string) bool {
	for _, x := range list {
		if x == "ANY" || x == v {
			return true
		}
	}
	return false
}

// HTTPHandler serves the operator API: GET /state, POST /reserve and
// /unreserve, GET/POST /quota, GET/POST /weights. Reads are open (like
// Mesos's default, authenticate_http_readonly=false); changes are
// authenticated and authorized by auth. With a nil Authorizer nothing is
// authenticated and the principal is "anonymous".
// Status codes follow Mesos: 200, 400 bad arguments, 401 unauthenticated,
// 403 not permitted, 409 insufficient resources.
//
// A non-nil auth also becomes the master's framework Authorizer (see
// SetAuthorizer): one credentials file and one set of ACLs for operators
// and frameworks.
func (m *Master) HTTPHandler(auth Authorizer) http.Handler {
	if auth != nil {
		m.SetAuthorizer(auth)
	}
	mux := http.NewServeMux()
	h := &httpAPI{m: m, auth: auth}
	mux.HandleFunc("GET /state", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, m.State())
	})
	mux.HandleFunc("POST /reserve", h.reservation(false))
	mux.HandleFunc("POST /unreserve", h.reservation(true))
	mux.HandleFunc("GET /quota", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, m.State().Quota)
	})
	mux.HandleFunc("POST /quota", h.setQuota)
	mux.HandleFunc("GET /weights", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, m.State().Weights)
	})
	mux.HandleFunc("POST /weights", h.setWeights)
	return mux
}

type httpAPI struct {
	m    *Master
	auth Authorizer
}

func (h *httpAPI) principal(r *http.Request) (string, error) {
	if h.auth == nil {
		return "anonymous", nil
	}
	return h.auth.Authenticate(r)
}

func (h *httpAPI) authorize(p, action, role string) error {
	if h.auth == nil {
		return nil
	}
	return h.auth.Authorize(p, action, role)
}

// fail writes the status code the error's sentinel calls for.
func (h *httpAPI) fail(w http.ResponseWriter, err error) {
	code := http.StatusInternalServerError
	switch {
	case errors.Is(err, ErrUnauthenticated):
		code = http.StatusUnauthorized
		w.Header().Set("WWW-Authenticate", `Basic realm="brim"`)
	case errors.Is(err, ErrForbidden):
		code = http.StatusForbidden
	case errors.Is(err, ErrInsufficient):
		code = http.StatusConflict
	case errors.Is(err, ErrInvalid), errors.Is(err, ErrNotFound), errors.Is(err, resources.ErrInvalid),
		errors.Is(err, resources.ErrRevocableReservation):
		code = http.StatusBadRequest
	}
	writeJSON(w, code, map[string]string{"error": err.Error()})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// decode reads a JSON body into v.
func decode(r *http.Request, v any) error {
	b, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("read body: %w: %w", ErrInvalid, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("malformed JSON body: %w: %w", ErrInvalid, err)
	}
	return nil
}

// ReserveRequest is the body of POST /reserve and /unreserve.
type ReserveRequest struct {
	AgentID   string `json:"agentId"`
	Resources string `json:"resources"` // e.g. "cpus(ads):1;mem(ads):512"
}

func (h *httpAPI) reservation(unreserve bool) http.HandlerFunc {
	action := ActionReserve
	if unreserve {
		action = ActionUnreserve
	}
	return func(w http.ResponseWriter, r *http.Request) {
		p, err := h.principal(r)
		if err != nil {
			h.fail(w, err)
			return
		}
		var req ReserveRequest
		if err := decode(r, &req); err != nil {
			h.fail(w, err)
			return
		}
		if req.AgentID == "" {
			h.fail(w, fmt.Errorf("agentId is required: %w", ErrInvalid))
			return
		}
		res, err := resources.Parse(req.Resources)
		if err != nil {
			h.fail(w, fmt.Errorf("resources: %w: %w", ErrInvalid, err))
			return
		}
		for role := range res.ByRole() {
			if role == resources.Unreserved {
				continue // rejected below with a message
			}
			if err := h.authorize(p, action, role); err != nil {
				h.fail(w, err)
				return
			}
		}
		if unreserve {
			err = h.m.Unreserve(req.AgentID, p, res)
		} else {
			err = h.m.Reserve(req.AgentID, p, res)
		}
		if err != nil {
			h.fail(w, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"result": "ok"})
	}
}

// QuotaRequest is the body of POST /quota; empty guarantee and limit
// remove the role's quota.
type QuotaRequest struct {
	Role      string `json:"role"`
	Guarantee string `json:"guarantee"`
	Limit     string `json:"limit"`
}

func (h *httpAPI) setQuota(w http.ResponseWriter, r *http.Request) {
	p, err := h.principal(r)
	if err != nil {
		h.fail(w, err)
		return
	}
	var req QuotaRequest
	if err := decode(r, &req); err != nil {
		h.fail(w, err)
		return
	}
	if req.Role == "" {
		h.fail(w, fmt.Errorf("role is required: %w", ErrInvalid))
		return
	}
	if err := h.authorize(p, ActionSetQuota, req.Role); err != nil {
		h.fail(w, err)
		return
	}
	g, err := resources.Parse(req.Guarantee)
	if err != nil {
		h.fail(w, fmt.Errorf("guarantee: %w: %w", ErrInvalid, err))
		return
	}
	l, err := resources.Parse(req.Limit)
	if err != nil {
		h.fail(w, fmt.Errorf("limit: %w: %w", ErrInvalid, err))
		return
	}
	if err := h.m.SetQuota(req.Role, allocator.Quota{Guarantee: g, Limit: l}); err != nil {
		h.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"result": "ok"})
}

// WeightRequest is one entry of the body of POST /weights.
type WeightRequest struct {
	Role   string  `json:"role"`
	Weight float64 `json:"weight"`
}

func (h *httpAPI) setWeights(w http.ResponseWriter, r *http.Request) {
	p, err := h.principal(r)
	if err != nil {
		h.fail(w, err)
		return
	}
	var req []WeightRequest
	if err := decode(r, &req); err != nil {
		h.fail(w, err)
		return
	}
	for _, x := range req {
		if x.Role == "" || !(x.Weight > 0) {
			h.fail(w, fmt.Errorf("weight %s=%s: need a role and a positive weight: %w", x.Role, strconv.FormatFloat(x.Weight, 'g', -1, 64), ErrInvalid))
			return
		}
		if err := h.authorize(p, ActionSetWeight, x.Role); err != nil {
			h.fail(w, err)
			return
		}
	}
	for _, x := range req {
		if err := h.m.SetWeight(x.Role, x.Weight); err != nil {
			h.fail(w, err)
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]string{"result": "ok"})
}
