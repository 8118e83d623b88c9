package imageref

import (
	"errors"
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
)

// ErrInvalid: a reference that does not parse (bad characters, an empty
// string). It is image.ErrInvalidReference.
var ErrInvalid = errors.New("invalid image reference")

// Parse parses a registry reference (`name:tag`, `name@sha256:…`,
// `host:port/name:tag`) with Docker Hub's defaults: a name with no host
// is Docker Hub's, one with no slash is in `library/`, no tag is
// `latest`; in `name:tag@digest` the digest pins the image and the tag is
// a label. It returns an error wrapping ErrInvalid.
func Parse(s string) (name.Reference, error) {
	if s == "" {
		return nil, fmt.Errorf("parse reference: empty: %w", ErrInvalid)
	}
	in := s
	if at := strings.IndexByte(s, '@'); at >= 0 {
		// name:tag@digest: the digest pins the image, the tag is a label.
		repo := s[:at]
		if c := strings.LastIndexByte(repo, ':'); c > strings.LastIndexByte(repo, '/') {
			repo = repo[:c]
		}
		s = repo + s[at:]
	}
	ref, err := name.ParseReference(s)
	if err != nil {
		return nil, fmt.Errorf("parse reference %q: %w: %v", in, ErrInvalid, err)
	}
	return ref, nil
}

// IsID reports whether s is an image ID or digest as the store names
// them: "sha256:" and 64 lower-case hex digits.
func IsID(s string) bool {
	hex, ok := strings.CutPrefix(s, "sha256:")
	if !ok || len(hex) != 64 {
		return false
	}
	for _, c := range hex {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
