package transport

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/brimnode/brim/master"
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
			"pass a principal and its secret (%s): %w", who.what, who.hint, master.ErrUnauthenticated)
	}
	principal, secret, ok := parseBasic(vals[0])
	if !ok {
		return "", fmt.Errorf("malformed %q metadata: want \"Basic base64(principal:secret)\": %w", AuthMetadata, master.ErrUnauthenticated)
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
// records nothing: the domain's RegisterAgent checks the principal
// against the one the agent ID registered with before.
func (a *API) authenticateAgent(ctx context.Context, agentID string) (string, error) {
	if !a.opts.AuthenticateAgents {
		return "", nil
	}
	auth := a.authorizer()
	if auth == nil {
		return "", fmt.Errorf("register agent: agent authentication is on but the master has no credentials: %w", master.ErrUnauthenticated)
	}
	p, err := authenticateRPC(ctx, auth, agentPeer)
	if err != nil {
		return "", fmt.Errorf("register agent %s: %w", agentID, err)
	}
	if err := auth.Authorize(p, ActionRegisterAgent, ""); err != nil {
		return "", fmt.Errorf("register agent %s: %w", agentID, err)
	}
	return p, nil
}

// caller authenticates a scheduler call from its metadata. Without an
// Authorizer it returns "" and a nil Authorizer.
func (a *API) caller(ctx context.Context) (string, Authorizer, error) {
	auth := a.authorizer()
	if auth == nil {
		return "", nil, nil
	}
	p, err := authenticateRPC(ctx, auth, frameworkPeer)
	if err != nil {
		return "", nil, err
	}
	return p, auth, nil
}

// authorizeCall authenticates a call for framework id and checks that the
// caller is the principal that subscribed it. An unknown framework is left
// to the call (NotFound).
func (a *API) authorizeCall(ctx context.Context, id string) (string, Authorizer, error) {
	p, auth, err := a.caller(ctx)
	if err != nil || auth == nil {
		return p, auth, err
	}
	if owner, ok := a.m.FrameworkPrincipal(id); ok && owner != p {
		return "", nil, fmt.Errorf("principal %q may not act for framework %s, subscribed by principal %q: %w", p, id, owner, master.ErrForbidden)
	}
	return p, auth, nil
}

// authorizeSubscribe authenticates a subscription (its FrameworkInfo's
// principal becomes the authenticated one) and checks the register ACL for
// every role the framework gets; a failover must come from the principal
// that subscribed the framework (the domain's SubscriberRoles).
func (a *API) authorizeSubscribe(ctx context.Context, req *master.Subscription) error {
	p, auth, err := a.caller(ctx)
	if err != nil || auth == nil {
		return err
	}
	fi := req.Info
	if fi == nil {
		return nil // Subscribe refuses it
	}
	if fi.Principal != "" && fi.Principal != p {
		return fmt.Errorf("subscribe: framework info names principal %q but the caller authenticated as %q: %w", fi.Principal, p, master.ErrForbidden)
	}
	fi.Principal = p
	roles, err := a.m.SubscriberRoles(fi, p)
	if err != nil {
		return err
	}
	for _, r := range roles {
		if err := auth.Authorize(p, ActionRegisterFramework, r); err != nil {
			return fmt.Errorf("subscribe: %w", err)
		}
	}
	return nil
}
