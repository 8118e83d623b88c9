package transport

import (
	"log/slog"
	"sync/atomic"

	"github.com/brimnode/brim/master"
)

// Options configure an API.
type Options struct {
	// Auth authenticates operators (HTTP), frameworks and — with
	// AuthenticateAgents — agents (gRPC), and applies the ACLs: one
	// credentials file and one set of ACLs for all. nil: nothing is
	// authenticated (the principal is "anonymous" over HTTP, "" over
	// gRPC), and no task may run as root.
	Auth Authorizer
	// AuthenticateAgents makes every agent registration (and
	// re-registration) carry per-RPC credentials (AuthMetadata) of a
	// principal Auth knows and that the register_agent ACL allows; an
	// agent ID keeps the principal it first registered with (the
	// domain's record). Without Auth every agent is refused.
	AuthenticateAgents bool
	// Log receives the transport's logs; nil discards them.
	Log *slog.Logger
}

// API serves one Master: its gRPC services (RegisterGRPC) and its HTTP
// API (Handler). Every handler authenticates, converts its request
// (convert.go), calls the domain and maps the domain's error once
// (status.go). Safe for concurrent use.
type API struct {
	m       *master.Master
	opts    Options
	log     *slog.Logger
	auth    atomic.Pointer[Authorizer] // nil: none
	ready   atomic.Bool                // see SetReady
	metrics *metrics
	// execs are the exec sessions being opened or spliced (exec_grpc.go).
	execs *execSessions
}

// New returns the API of m.
func New(m *master.Master, opts Options) *API {
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	a := &API{m: m, opts: opts, log: log.With("component", "master"), execs: newExecSessions()}
	a.SetAuthorizer(opts.Auth)
	a.metrics = newMetrics(m)
	return a
}

// Master is the master the API serves.
func (a *API) Master() *master.Master { return a.m }

// SetAuthorizer replaces Options.Auth (nil turns authentication off).
// Subscribe and every framework call then need per-RPC credentials
// (AuthMetadata) of a known principal (codes.Unauthenticated
// otherwise); subscribing to a role needs ActionRegisterFramework for
// it, a RESERVE or UNRESERVE operation ActionReserve or ActionUnreserve,
// and a call for a framework must come from the principal that
// subscribed it (codes.PermissionDenied otherwise).
func (a *API) SetAuthorizer(auth Authorizer) {
	if auth == nil {
		a.auth.Store(nil)
		return
	}
	a.auth.Store(&auth)
}

func (a *API) authorizer() Authorizer {
	if p := a.auth.Load(); p != nil {
		return *p
	}
	return nil
}

// SetReady says whether the master serves: its assembly sets it once the
// store is loaded and the port listens. GET /health answers 200 only
// then.
func (a *API) SetReady(ready bool) { a.ready.Store(ready) }
