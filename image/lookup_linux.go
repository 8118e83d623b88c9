package image

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// Open opens the regular file name (a path inside the image, such as
// "etc/passwd") as the container's root shows it: the image's layers
// stacked the way overlayfs stacks them. The top layer that has the path
// wins; a whiteout of the path or of a directory above it, a directory
// in its place made opaque, or a file where a directory would be, in a
// higher layer, hides the lower layers' copies. Every component is
// opened without following symlinks (O_NOFOLLOW below the layer's fd),
// so nothing outside the store is ever read; a symlink on the way is an
// error naming it (a container's passwd is a regular file). The caller
// closes the file. Errors wrap ErrNotFound and fs.ErrNotExist when no
// layer has the file, or ErrNotSupported for a symlink or a non-regular
// file.
func (s *Store) Open(img Image, name string) (*os.File, error) {
	clean := path.Clean("/" + name)[1:]
	if clean == "" || slices.Contains(strings.Split(name, "/"), "..") {
		return nil, fmt.Errorf("open %q in image %s: %w: want a path below the root, with no .. component", name, img.ID, ErrInvalidReference)
	}
	parts := strings.Split(clean, "/")
	for _, l := range slices.Backward(img.Layers) {
		f, hidden, err := openInLayer(s.LayerDir(l.DiffID), parts)
		if err != nil {
			return nil, fmt.Errorf("open %s in image %s: %w", clean, img.ID, err)
		}
		if f != nil {
			return f, nil
		}
		if hidden {
			break
		}
	}
	return nil, fmt.Errorf("open %s in image %s: %w: %w", clean, img.ID, ErrNotFound, fs.ErrNotExist)
}

// openInLayer looks parts up in one layer's directory. It returns the
// open file when the layer has it, hidden when the layer hides the
// lower layers' copies (whiteout, opaque directory, non-directory in a
// parent's place), neither when the lower layers decide.
func openInLayer(root string, parts []string) (f *os.File, hidden bool, err error) {
	dfd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, false, fmt.Errorf("open layer: %w", err)
	}
	defer func() { _ = unix.Close(dfd) }()
	opaque := false
	for i, p := range parts {
		var st unix.Stat_t
		err := unix.Fstatat(dfd, p, &st, unix.AT_SYMLINK_NOFOLLOW)
		if errors.Is(err, unix.ENOENT) {
			return nil, opaque, nil
		}
		if err != nil {
			return nil, false, err
		}
		last := i == len(parts)-1
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFCHR:
			if st.Rdev == 0 { // overlay's whiteout
				return nil, true, nil
			}
			return nil, false, fmt.Errorf("%s is a device: %w", strings.Join(parts[:i+1], "/"), ErrNotSupported)
		case unix.S_IFLNK:
			return nil, false, fmt.Errorf("%s is a symlink, not followed: %w", strings.Join(parts[:i+1], "/"), ErrNotSupported)
		case unix.S_IFREG:
			if !last {
				return nil, true, nil // a file where a directory would be hides the lower ones
			}
			fd, err := unix.Openat(dfd, p, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
			if err != nil {
				return nil, false, err
			}
			return os.NewFile(uintptr(fd), strings.Join(parts, "/")), false, nil
		case unix.S_IFDIR:
			if last {
				return nil, false, fmt.Errorf("%s is a directory: %w", strings.Join(parts, "/"), ErrNotSupported)
			}
			next, err := unix.Openat(dfd, p, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				return nil, false, err
			}
			_ = unix.Close(dfd)
			dfd = next
			if isOpaque(dfd) {
				opaque = true
			}
		default:
			return nil, false, fmt.Errorf("%s is not a regular file: %w", strings.Join(parts[:i+1], "/"), ErrNotSupported)
		}
	}
	return nil, opaque, nil
}

// isOpaque reports whether the directory at fd carries overlay's opaque
// marker (the unpacked form of `.wh..wh..opq`).
func isOpaque(fd int) bool {
	var b [1]byte
	n, err := unix.Getxattr(fmt.Sprintf("/proc/self/fd/%d", fd), overlayOpaque, b[:])
	return err == nil && n == 1 && b[0] == 'y'
}
