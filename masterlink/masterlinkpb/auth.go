package masterlinkpb

import (
	"context"
	"encoding/base64"

	"google.golang.org/grpc/credentials"
)

// BasicCredentials returns per-RPC credentials that send
// "authorization: Basic base64(principal:secret)" with every call, as
// the master's agent and framework authentication expects (agents through
// masterlink, frameworks through scheduler). They do not require
// transport security: without TLS the secret crosses the network in
// clear text.
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
