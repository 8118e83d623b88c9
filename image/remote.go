package image

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// ErrUnauthorized: the registry refused the credentials (or their
// absence) for this repository.
var ErrUnauthorized = errors.New("registry refused the credentials")

// transportFor is the HTTP transport for one registry host: its CAs
// besides the system's, and plain HTTP refused unless the host is listed
// as insecure (go-containerregistry itself falls back to HTTP for
// loopback and private addresses; brim does not).
func (o *Options) transportFor(host string) (http.RoundTripper, error) {
	rc := o.registry(host)
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	if rc.CAFile != "" {
		pem, err := os.ReadFile(rc.CAFile)
		if err != nil {
			return nil, fmt.Errorf("registry %s: read CA file: %w", host, err)
		}
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("registry %s: CA file %s holds no PEM certificate", host, rc.CAFile)
		}
		base.TLSClientConfig.RootCAs = pool
	}
	return &schemeGuard{next: base, host: host, insecure: rc.Insecure}, nil
}

// schemeGuard refuses plain-HTTP requests unless the registry is listed
// as insecure; a token realm on another host is held to the same rule.
type schemeGuard struct {
	next     http.RoundTripper
	host     string
	insecure bool
}

func (g *schemeGuard) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme == "http" && !g.insecure {
		return nil, fmt.Errorf("registry %s: plain HTTP to %s refused (list it as insecure, loopback only): %w", g.host, req.URL.Host, ErrInsecure)
	}
	return g.next.RoundTrip(req)
}

// remoteOptions are go-containerregistry's options for one host.
func (s *Store) remoteOptions(ctx context.Context, host string, kc keychain) ([]remote.Option, error) {
	tr, err := s.opts.transportFor(host)
	if err != nil {
		return nil, err
	}
	return []remote.Option{
		remote.WithContext(ctx),
		remote.WithTransport(tr),
		remote.WithAuthFromKeychain(kc),
		remote.WithUserAgent("brim"),
	}, nil
}

// candidates are the references to try for ref: its registry's mirrors
// in order, then the registry itself.
func (s *Store) candidates(ref name.Reference) ([]name.Reference, error) {
	host := ref.Context().RegistryStr()
	var out []name.Reference
	for _, m := range s.opts.registry(host).Mirrors {
		r, err := rehost(ref, m, s.opts.registry(m).Insecure)
		if err != nil {
			return nil, fmt.Errorf("mirror %s for %s: %w", m, host, err)
		}
		out = append(out, r)
	}
	r, err := rehost(ref, host, s.opts.registry(host).Insecure)
	if err != nil {
		return nil, err
	}
	return append(out, r), nil
}

// rehost is ref on another registry host, with the same repository
// (library/ kept for Docker Hub's official images, as mirrors expect).
func rehost(ref name.Reference, host string, insecure bool) (name.Reference, error) {
	var opts []name.Option
	if insecure {
		opts = append(opts, name.Insecure)
	}
	repo := ref.Context().RepositoryStr()
	s := host + "/" + repo
	if d, ok := ref.(name.Digest); ok {
		s += "@" + d.DigestStr()
	} else {
		s += ":" + ref.Identifier()
	}
	r, err := name.ParseReference(s, opts...)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidReference, err)
	}
	return r, nil
}

// classify wraps a registry error in the store's sentinels.
func classify(err error) error {
	var te *transport.Error
	if errors.As(err, &te) {
		switch te.StatusCode {
		case http.StatusNotFound:
			return fmt.Errorf("%w: %v", ErrNotFound, err)
		case http.StatusUnauthorized, http.StatusForbidden:
			return fmt.Errorf("%w: %v", ErrUnauthorized, err)
		}
		for _, d := range te.Errors {
			switch d.Code {
			case transport.ManifestUnknownErrorCode, transport.NameUnknownErrorCode, transport.BlobUnknownErrorCode:
				return fmt.Errorf("%w: %v", ErrNotFound, err)
			case transport.UnauthorizedErrorCode, transport.DeniedErrorCode:
				return fmt.Errorf("%w: %v", ErrUnauthorized, err)
			}
		}
	}
	return err
}

// hostOf is the registry host a reference names, in the one spelling.
func hostOf(ref name.Reference) string {
	return registryName(ref.Context().RegistryStr())
}
