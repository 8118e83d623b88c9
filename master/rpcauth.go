package master

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"

	"google.golang.org/grpc/metadata"
)

// AuthMetadata is the gRPC metadata key of the per-RPC credentials of
// frameworks (scheduler.Options.Principal and Secret send it) and of agents
// (masterlink.Options.Principal and Secret): "Basic " +
// base64(principal ":" secret), as in HTTP basic authentication.
const AuthMetadata = "authorization"

// rpcPeer names who authenticates over gRPC in error messages, with the
// command line that passes credentials.
type rpcPeer struct{ what, hint string }

var (
	frameworkPeer = rpcPeer{"framework", "brim run --principal P --secret-file F"}
	agentPeer     = rpcPeer{"agent", "brim agent --principal P --secret-file F"}
)

// authenticateRPC returns the principal whose credentials (AuthMetadata)
// ctx's incoming metadata carries, checked by a. Errors wrap
// ErrUnauthenticated and name the problem: no credentials, malformed
// ones, an unknown principal or a wrong secret.
func authenticateRPC(ctx context.Context, a Authorizer, who rpcPeer) (string, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	vals := md.Get(AuthMetadata)
	if len(vals) == 0 {
		return "", fmt.Errorf("%s authentication required: no credentials; the master has a credentials file; "+
			"pass a principal and its secret (%s): %w", who.what, who.hint, ErrUnauthenticated)
	}
	principal, secret, ok := parseBasic(vals[0])
	if !ok {
		return "", fmt.Errorf("malformed %q metadata: want \"Basic base64(principal:secret)\": %w", AuthMetadata, ErrUnauthenticated)
	}
	if err := a.AuthenticateSecret(principal, secret); err != nil {
		return "", fmt.Errorf("%s authentication: %w", who.what, err)
	}
	return principal, nil
}

// parseBasic decodes "Basic base64(principal:secret)".
func parseBasic(v string) (principal, secret string, ok bool) {
	const prefix = "Basic "
	if len(v) < len(prefix) || !strings.EqualFold(v[:len(prefix)], prefix) {
		return "", "", false
	}
	b, err := base64.StdEncoding.DecodeString(v[len(prefix):])
	if err != nil {
		return "", "", false
	}
	return strings.Cut(string(b), ":")
}

// authenticateAgent authenticates an agent's stream when
// Options.AuthenticateAgents is on and applies the register_agent ACL; it
// returns the agent's principal ("" with agent authentication off). It
// records nothing: registerAgent checks the principal against the one the
// agent ID registered with before.
func (m *Master) authenticateAgent(ctx context.Context, agentID string) (string, error) {
	if !m.opts.AuthenticateAgents {
		return "", nil
	}
	a := m.authorizer()
	if a == nil {
		return "", fmt.Errorf("register agent: agent authentication is on but the master has no credentials: %w", ErrUnauthenticated)
	}
	p, err := authenticateRPC(ctx, a, agentPeer)
	if err != nil {
		return "", fmt.Errorf("register agent %s: %w", agentID, err)
	}
	if err := a.Authorize(p, ActionRegisterAgent, ""); err != nil {
		return "", fmt.Errorf("register agent %s: %w", agentID, err)
	}
	return p, nil
}

// agentPrincipalLocked returns the principal to record for agent id
// registering as principal: principal itself, or without one (agent
// authentication off) the principal id registered with before, which an
// agent ID keeps. With agent authentication on, an ID known (live, or from
// the store) with another principal is refused; an ID known without one
// (registered before authentication was turned on) takes the new one.
func (m *Master) agentPrincipalLocked(id, principal string) (string, error) {
	owner := m.knownAgents[id].Principal
	if ag := m.agents[id]; ag != nil && ag.principal != "" {
		owner = ag.principal
	}
	if principal == "" {
		return owner, nil
	}
	if owner != "" && owner != principal {
		return "", fmt.Errorf("register agent: principal %q may not register agent %s, registered by principal %q: %w", principal, id, owner, ErrForbidden)
	}
	return principal, nil
}
