package image

import (
	"fmt"
	"strings"

	"github.com/brimnode/brim/image/imageref"
	"github.com/google/go-containerregistry/pkg/name"
)

// Transport is where a Source's image comes from.
type Transport int

const (
	// Registry is an OCI distribution registry (`docker.io/library/redis:7`).
	Registry Transport = iota
	// OCILayout is an OCI image layout directory (`oci:DIR[:NAME]`).
	OCILayout
	// OCIArchive is a tar of an OCI image layout (`oci-archive:FILE[:NAME]`).
	OCIArchive
	// DockerArchive is a `docker save` tar (`docker-archive:FILE[:NAME]`).
	DockerArchive
)

var transportPrefix = map[Transport]string{
	OCILayout:     "oci:",
	OCIArchive:    "oci-archive:",
	DockerArchive: "docker-archive:",
}

// DockerHub is the registry that a reference without a host names, as it
// is written in normalised references.
const DockerHub = "docker.io"

// Source is a parsed image source: a registry reference, or a layout or
// archive on disk. The zero value is not valid; make one with ParseSource.
type Source struct {
	Transport Transport
	// Ref is the normalised registry reference (Registry), e.g.
	// docker.io/library/busybox:latest or …/app@sha256:….
	Ref string
	// Path is the directory or file (the other transports).
	Path string
	// Name is the image to take from a layout or archive that holds
	// several: a layout's org.opencontainers.image.ref.name, or a docker
	// archive's repo:tag. Empty takes the only one.
	Name string

	ref name.Reference // Registry only
}

// String is the source as ParseSource accepts it.
func (s Source) String() string {
	if s.Transport == Registry {
		return s.Ref
	}
	out := transportPrefix[s.Transport] + s.Path
	if s.Name != "" {
		out += ":" + s.Name
	}
	return out
}

// ParseSource parses a registry reference (`name:tag`, `name@sha256:…`,
// `host:port/name:tag`; a name with no host is Docker Hub's, one with
// no slash is in `library/`, no tag is `latest`; `name:tag@digest` keeps
// the digest) or `oci:DIR[:NAME]`, `oci-archive:FILE[:NAME]`,
// `docker-archive:FILE[:NAME]`. As in skopeo, the path ends at its first
// colon (a path with a colon cannot be named), so NAME may be a whole
// reference (`docker-archive:app.tar:example.com/app:1`). It returns an
// error wrapping ErrInvalidReference.
func ParseSource(s string) (Source, error) {
	for t, p := range transportPrefix {
		if rest, ok := strings.CutPrefix(s, p); ok {
			return parseLocal(s, t, rest)
		}
	}
	ref, err := ParseReference(s)
	if err != nil {
		return Source{}, err
	}
	return Source{Transport: Registry, Ref: Normalize(ref), ref: ref}, nil
}

func parseLocal(s string, t Transport, rest string) (Source, error) {
	src := Source{Transport: t, Path: rest}
	if i := strings.IndexByte(rest, ':'); i >= 0 {
		src.Path, src.Name = rest[:i], rest[i+1:]
		if src.Name == "" {
			return Source{}, fmt.Errorf("parse %q: empty name after the colon: %w", s, ErrInvalidReference)
		}
	}
	if src.Path == "" {
		return Source{}, fmt.Errorf("parse %q: no path: %w", s, ErrInvalidReference)
	}
	return src, nil
}

// ParseReference parses a registry reference as ParseSource does, with
// Docker Hub's defaults (imageref.Parse). It returns an error wrapping
// ErrInvalidReference.
func ParseReference(s string) (name.Reference, error) { return imageref.Parse(s) }

// Normalize is ref in the store's one spelling:
// `docker.io/library/busybox:latest`, `host:port/repo@sha256:…`.
func Normalize(ref name.Reference) string {
	repo := ref.Context()
	out := registryName(repo.RegistryStr()) + "/" + repo.RepositoryStr()
	if d, ok := ref.(name.Digest); ok {
		return out + "@" + d.DigestStr()
	}
	return out + ":" + ref.Identifier()
}

// registryName is the one spelling of a registry host: Docker Hub's
// aliases are docker.io, the rest lower-cased as DNS is.
func registryName(host string) string {
	host = strings.ToLower(host)
	switch host {
	case "index.docker.io", "registry-1.docker.io", "docker.io", "registry.hub.docker.com":
		return DockerHub
	}
	return host
}

// IsID reports whether s is an image ID or digest as the store names
// them: "sha256:" and 64 lower-case hex digits (imageref.IsID).
func IsID(s string) bool { return imageref.IsID(s) }
