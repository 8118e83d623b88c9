package containerizer

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/brimnode/brim/image"
)

// Snapshotter makes and removes the roots of containers launched from an
// image: package image's Store. Prepare leases the image to the
// container (no garbage collection takes it) and makes its upper and
// work dirs; Release removes them and the lease; Snapshots lists the
// leases, which outlive the agent.
type Snapshotter interface {
	Prepare(ctx context.Context, id string, img image.Image) (*image.Snapshot, error)
	Release(id string) error
	Snapshots() []image.SnapshotInfo
}

// ErrNoImageStore is returned by Launch for a Spec with an image when
// the containerizer has no Config.Images.
var ErrNoImageStore = errors.New("no image store")

// checkImageSpec checks an image launch's fields: an image and a rootfs
// exclude each other, and the user is numeric (the caller resolves it in
// the image's user database, never the host's).
func checkImageSpec(spec *Spec) error {
	if spec.Image == "" {
		if spec.ReadWrite {
			return errors.New("read-write root without an image (a rootfs and the host root are read-only)")
		}
		return nil
	}
	if spec.Rootfs != "" {
		return fmt.Errorf("both an image (%s) and a rootfs (%s)", spec.Image, spec.Rootfs)
	}
	if spec.User != "" && !numericUser(spec.User) {
		return fmt.Errorf("user %q of an image container: want UID:GID resolved in the image's /etc/passwd", spec.User)
	}
	return nil
}

// numericUser reports whether u is "UID:GID".
func numericUser(u string) bool {
	uid, gid, ok := strings.Cut(u, ":")
	_, err1 := strconv.ParseUint(uid, 10, 32)
	_, err2 := strconv.ParseUint(gid, 10, 32)
	return ok && err1 == nil && err2 == nil
}
