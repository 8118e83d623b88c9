package imageref_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/brimnode/brim/image"
	"github.com/brimnode/brim/image/imageref"
)

func TestParse(t *testing.T) {
	digest := "sha256:" + strings.Repeat("a", 64)
	for _, tc := range []struct{ in, want string }{
		{"busybox", "index.docker.io/library/busybox:latest"},
		{"registry.example.com:5000/app:1", "registry.example.com:5000/app:1"},
		{"app:1@" + digest, "index.docker.io/library/app@" + digest}, // the digest pins, the tag is a label
	} {
		ref, err := imageref.Parse(tc.in)
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.in, err)
			continue
		}
		if got := ref.Name(); got != tc.want {
			t.Errorf("Parse(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
	for _, in := range []string{"", "Bad/Upper:1", "app:", "app@sha256:short"} {
		_, err := imageref.Parse(in)
		if !errors.Is(err, imageref.ErrInvalid) || !errors.Is(err, image.ErrInvalidReference) {
			t.Errorf("Parse(%q): %v, want ErrInvalid (image.ErrInvalidReference)", in, err)
		}
	}
}

func TestIsID(t *testing.T) {
	for in, want := range map[string]bool{
		"sha256:" + strings.Repeat("0", 64): true,
		"sha256:" + strings.Repeat("A", 64): false, // upper case is not how the store names them
		"sha256:" + strings.Repeat("0", 63): false,
		strings.Repeat("0", 64):             false,
		"busybox":                           false,
	} {
		if got := imageref.IsID(in); got != want {
			t.Errorf("IsID(%q) = %v, want %v", in, got, want)
		}
	}
}
