package image

import (
	"errors"
	"fmt"
	"strings"

	"github.com/brimnode/brim/image/imageref"
	"github.com/brimnode/brim/internal/errdefs"
)

var (
	// ErrNotFound: the store holds no image under that reference or
	// digest, or the source (a registry, a layout, an archive) has none.
	ErrNotFound = errors.New("image not found")
	// ErrInvalidReference: a reference or source string that does not
	// parse (bad characters, an unknown transport, an empty path). It is
	// imageref.ErrInvalid.
	ErrInvalidReference = imageref.ErrInvalid
	// ErrDigestMismatch: content whose digest is not the one that named
	// it. Returned wrapped in a *DigestError.
	ErrDigestMismatch = errors.New("digest mismatch")
	// ErrNoPlatform: the image or index has nothing for the platform
	// asked for (the host's by default). Returned wrapped in a
	// *PlatformError.
	ErrNoPlatform = errors.New("no image for this platform")
	// ErrUnsafeLayer: a layer that would write outside its directory, or
	// holds what the store refuses (device nodes, overlay xattrs).
	// Returned wrapped in an *UnsafeLayerError.
	ErrUnsafeLayer = errors.New("unsafe layer")
	// ErrInUse: a container holds a lease on the image.
	ErrInUse = errors.New("image in use")
	// ErrExist: a snapshot for that container exists already.
	ErrExist = errors.New("snapshot exists")
	// ErrInsecure: plain HTTP, or a registry listed as insecure that is
	// not on loopback.
	ErrInsecure = errors.New("insecure registry refused")
	// ErrNotSupported: this host cannot unpack or mount layers (not
	// Linux). The one brim-wide sentinel, internal/errdefs.
	ErrNotSupported = errdefs.ErrNotSupported
)

// DigestError is content that did not hash to the digest that named it.
// Its message names the digest; Pull's wrapping names the reference.
type DigestError struct {
	Ref  string // the reference pulled
	What string // "manifest", "config", "layer", "layer (uncompressed)"
	Want string // the digest asked for
	Got  string // the digest of what arrived
}

func (e *DigestError) Error() string {
	return fmt.Sprintf("%s %s: content hashes to %s: %v", e.What, e.Want, e.Got, ErrDigestMismatch)
}

// Is makes errors.Is(err, ErrDigestMismatch) hold.
func (e *DigestError) Is(target error) bool { return target == ErrDigestMismatch }

// PlatformError is an image or index with nothing for Want.
type PlatformError struct {
	Ref       string
	Want      string   // os/arch[/variant]
	Available []string // the platforms the image or index has
}

func (e *PlatformError) Error() string {
	return fmt.Sprintf("%v: want %s, image has %s", ErrNoPlatform, e.Want, strings.Join(e.Available, ", "))
}

// Is makes errors.Is(err, ErrNoPlatform) hold.
func (e *PlatformError) Is(target error) bool { return target == ErrNoPlatform }

// UnsafeLayerError is a layer entry the store refused.
type UnsafeLayerError struct {
	Entry  string // the entry's name in the tar
	Reason string
}

func (e *UnsafeLayerError) Error() string {
	return fmt.Sprintf("%v: entry %q: %s", ErrUnsafeLayer, e.Entry, e.Reason)
}

// Is makes errors.Is(err, ErrUnsafeLayer) hold.
func (e *UnsafeLayerError) Is(target error) bool { return target == ErrUnsafeLayer }
