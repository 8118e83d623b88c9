package image

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// The kernel resolves every path a layer names below the layer's root:
// never through a symlink (RESOLVE_NO_SYMLINKS: a tar of a file system
// never has an entry beneath a symlink, so one that does is an attack or
// a broken layer), never above the root (RESOLVE_BENEATH), never across
// a mount. The last component of every name is created with *at calls
// that do not follow it (O_NOFOLLOW|O_EXCL, mkdirat, symlinkat, linkat
// without AT_SYMLINK_FOLLOW, fchownat with AT_SYMLINK_NOFOLLOW). So a
// layer writes only inside its directory, whatever order its entries
// come in.
const resolveInLayer = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS |
	unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV

const (
	whiteoutPrefix = ".wh."
	opaqueMarker   = ".wh..wh..opq"
	overlayOpaque  = "trusted.overlay.opaque"
)

// extractor unpacks one layer's tar into root.
type extractor struct {
	root    int // the layer's fs/ directory
	uid0    bool
	dirName string // the cached parent directory (relative, "." is root)
	dirFd   int    // its fd, -1 when none
	times   []dirTime
	stats   unpackStats
	buf     []byte
}

type dirTime struct {
	name string
	ts   []unix.Timespec
}

// unpack extracts the tar r into dir (created, mode 0755), translating
// OCI whiteouts to overlayfs's form: `.wh.NAME` becomes a 0/0 character
// device NAME, `.wh..wh..opq` the trusted.overlay.opaque=y xattr on its
// directory. Device nodes and overlay xattrs in the layer are refused;
// setuid/setgid bits, owners, times, file capabilities and user.* xattrs
// are kept.
func unpack(ctx context.Context, dir string, r io.Reader) (unpackStats, error) {
	if err := os.Mkdir(dir, 0o755); err != nil {
		return unpackStats{}, err
	}
	root, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return unpackStats{}, fmt.Errorf("open %s: %w", dir, err)
	}
	x := &extractor{root: root, dirFd: -1, uid0: os.Geteuid() == 0, buf: make([]byte, 1<<20)}
	defer x.close()
	tr := tar.NewReader(r)
	for {
		if err := ctx.Err(); err != nil {
			return x.stats, err
		}
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return x.stats, fmt.Errorf("read tar: %w", err)
		}
		if err := x.entry(hdr, tr); err != nil {
			return x.stats, err
		}
		x.stats.Entries++
	}
	return x.stats, x.finish()
}

func (x *extractor) close() {
	x.forget()
	_ = unix.Close(x.root)
}

// forget drops the cached parent: after anything is removed, a cached
// directory may be gone or replaced.
func (x *extractor) forget() {
	if x.dirFd >= 0 {
		_ = unix.Close(x.dirFd)
	}
	x.dirFd, x.dirName = -1, ""
}

// cleanName is an entry's name relative to the layer's root: leading
// slashes and ./ dropped, as tar does; any .. component refused.
func cleanName(name string) (string, error) {
	for _, c := range strings.Split(name, "/") {
		if c == ".." {
			return "", &UnsafeLayerError{Entry: name, Reason: "path has a .. component"}
		}
	}
	n := path.Clean("/" + name)[1:]
	if n == "" {
		return ".", nil
	}
	return n, nil
}

func (x *extractor) entry(hdr *tar.Header, r io.Reader) error {
	name, err := cleanName(hdr.Name)
	if err != nil {
		return err
	}
	switch hdr.Typeflag {
	case tar.TypeXGlobalHeader:
		return nil
	case tar.TypeChar, tar.TypeBlock:
		return &UnsafeLayerError{Entry: hdr.Name, Reason: "device nodes are refused (the runtime gives each container its own /dev)"}
	}
	if err := checkXattrs(hdr); err != nil {
		return err
	}
	if name == "." {
		if hdr.Typeflag != tar.TypeDir {
			return &UnsafeLayerError{Entry: hdr.Name, Reason: "the layer's root is not a directory"}
		}
		return x.meta(x.root, hdr, true)
	}
	dir, base := path.Split(name)
	dir = path.Clean("/" + dir)[1:]
	if dir == "" {
		dir = "."
	}
	if strings.HasPrefix(base, whiteoutPrefix) {
		return x.whiteout(hdr, dir, base)
	}
	pfd, err := x.parent(hdr.Name, dir)
	if err != nil {
		return err
	}
	if err := x.create(pfd, base, hdr, r); err != nil {
		return fmt.Errorf("entry %q: %w", hdr.Name, err)
	}
	return nil
}

// parent opens the directory an entry goes in, making missing ones
// (tars may omit them) with mode 0755.
func (x *extractor) parent(entry, dir string) (int, error) {
	if dir == "." {
		return x.root, nil
	}
	if dir == x.dirName && x.dirFd >= 0 {
		return x.dirFd, nil
	}
	x.forget()
	fd, err := unix.Openat2(x.root, dir, &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: resolveInLayer})
	if errors.Is(err, unix.ENOENT) {
		fd, err = x.mkdirAll(dir)
	}
	if err != nil {
		return -1, resolveError(entry, dir, err)
	}
	x.dirName, x.dirFd = dir, fd
	return fd, nil
}

func (x *extractor) mkdirAll(dir string) (int, error) {
	fd, err := unix.Dup(x.root)
	if err != nil {
		return -1, err
	}
	for _, c := range strings.Split(dir, "/") {
		if err := unix.Mkdirat(fd, c, 0o755); err == nil {
			x.stats.Size += 4096
		} else if !errors.Is(err, unix.EEXIST) {
			_ = unix.Close(fd)
			return -1, err
		}
		next, err := unix.Openat2(fd, c, &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: resolveInLayer})
		_ = unix.Close(fd)
		if err != nil {
			return -1, err
		}
		fd = next
	}
	return fd, nil
}

func resolveError(entry, dir string, err error) error {
	switch {
	case errors.Is(err, unix.ELOOP):
		return &UnsafeLayerError{Entry: entry, Reason: fmt.Sprintf("its directory %s passes through a symlink", dir)}
	case errors.Is(err, unix.EXDEV):
		return &UnsafeLayerError{Entry: entry, Reason: fmt.Sprintf("its directory %s escapes the layer", dir)}
	case errors.Is(err, unix.ENOTDIR):
		return fmt.Errorf("entry %q: %s is not a directory in this layer", entry, dir)
	}
	return fmt.Errorf("entry %q: open %s: %w", entry, dir, err)
}

// whiteout translates `.wh.NAME` and `.wh..wh..opq` to overlay's form.
func (x *extractor) whiteout(hdr *tar.Header, dir, base string) error {
	pfd, err := x.parent(hdr.Name, dir)
	if err != nil {
		return err
	}
	if base == opaqueMarker {
		if err := unix.Fsetxattr(pfd, overlayOpaque, []byte("y"), 0); err != nil {
			return fmt.Errorf("entry %q: mark %s opaque: %w", hdr.Name, dir, err)
		}
		return nil
	}
	if strings.HasPrefix(base, whiteoutPrefix+whiteoutPrefix) {
		return nil // aufs's own metadata (.wh..wh.plnk, …): nothing for overlay
	}
	target := strings.TrimPrefix(base, whiteoutPrefix)
	if target == "" || target == "." || target == ".." {
		return &UnsafeLayerError{Entry: hdr.Name, Reason: "whiteout of no name"}
	}
	if err := x.clear(pfd, target, false); err != nil {
		return fmt.Errorf("entry %q: %w", hdr.Name, err)
	}
	if err := unix.Mknodat(pfd, target, unix.S_IFCHR, 0); err != nil {
		return fmt.Errorf("entry %q: make whiteout: %w", hdr.Name, err)
	}
	return nil
}

// clear makes room for name in pfd: a directory stays when a directory
// replaces it (its contents merge, as tar does), anything else goes.
func (x *extractor) clear(pfd int, name string, keepDir bool) error {
	var st unix.Stat_t
	if err := unix.Fstatat(pfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return unix.Unlinkat(pfd, name, 0)
	}
	if keepDir {
		return nil
	}
	x.forget()
	return removeAllAt(pfd, name)
}

// removeAllAt removes the directory name in pfd and everything below it,
// never following a symlink.
func removeAllAt(pfd int, name string) error {
	fd, err := unix.Openat(pfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), name)
	names, err := f.Readdirnames(-1)
	if err == nil {
		for _, n := range names {
			if err = unix.Unlinkat(fd, n, 0); errors.Is(err, unix.EISDIR) || errors.Is(err, unix.EPERM) {
				err = removeAllAt(fd, n)
			}
			if err != nil {
				break
			}
		}
	}
	_ = f.Close()
	if err != nil {
		return err
	}
	return unix.Unlinkat(pfd, name, unix.AT_REMOVEDIR)
}

func (x *extractor) create(pfd int, base string, hdr *tar.Header, r io.Reader) error {
	switch hdr.Typeflag {
	case tar.TypeDir:
		return x.mkdir(pfd, base, hdr)
	case tar.TypeReg, tar.TypeGNUSparse: // the reader reports TypeRegA as TypeReg and fills sparse holes
		return x.file(pfd, base, hdr, r)
	case tar.TypeSymlink:
		if err := x.clear(pfd, base, false); err != nil {
			return err
		}
		if err := unix.Symlinkat(hdr.Linkname, pfd, base); err != nil {
			return err
		}
		return x.metaAt(pfd, base, hdr)
	case tar.TypeLink:
		return x.hardlink(pfd, base, hdr)
	case tar.TypeFifo:
		if err := x.clear(pfd, base, false); err != nil {
			return err
		}
		if err := unix.Mknodat(pfd, base, unix.S_IFIFO|0o600, 0); err != nil {
			return err
		}
		return x.metaAt(pfd, base, hdr)
	}
	return &UnsafeLayerError{Entry: hdr.Name, Reason: fmt.Sprintf("unsupported entry type %q", hdr.Typeflag)}
}

func (x *extractor) mkdir(pfd int, base string, hdr *tar.Header) error {
	if err := x.clear(pfd, base, true); err != nil {
		return err
	}
	if err := unix.Mkdirat(pfd, base, 0o700); err == nil {
		x.stats.Size += 4096
	} else if !errors.Is(err, unix.EEXIST) {
		return err
	}
	fd, err := unix.Openat(pfd, base, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer func() { _ = unix.Close(fd) }()
	return x.meta(fd, hdr, true)
}

func (x *extractor) file(pfd int, base string, hdr *tar.Header, r io.Reader) error {
	const flags = unix.O_WRONLY | unix.O_CREAT | unix.O_EXCL | unix.O_NOFOLLOW | unix.O_CLOEXEC
	fd, err := unix.Openat(pfd, base, flags, 0o600)
	if errors.Is(err, unix.EEXIST) {
		if err := x.clear(pfd, base, false); err != nil {
			return err
		}
		fd, err = unix.Openat(pfd, base, flags, 0o600)
	}
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), base)
	defer f.Close()
	n, err := io.CopyBuffer(fileWriter{f}, r, x.buf)
	if err != nil {
		return err
	}
	x.stats.Size += (n + 4095) &^ 4095
	return x.meta(fd, hdr, false)
}

// fileWriter hides *os.File's ReadFrom, so io.CopyBuffer uses the
// extractor's large buffer instead of a small one per file.
type fileWriter struct{ f *os.File }

func (w fileWriter) Write(p []byte) (int, error) { return w.f.Write(p) }

func (x *extractor) hardlink(pfd int, base string, hdr *tar.Header) error {
	target, err := cleanName(hdr.Linkname)
	if err != nil || target == "." {
		return &UnsafeLayerError{Entry: hdr.Name, Reason: fmt.Sprintf("hard link to %q, outside the layer", hdr.Linkname)}
	}
	tdir, tbase := path.Split(target)
	tdir = path.Clean("/" + tdir)[1:]
	tfd := x.root
	if tdir != "" {
		tfd, err = unix.Openat2(x.root, tdir, &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: resolveInLayer})
		if err != nil {
			return resolveError(hdr.Linkname, tdir, err)
		}
		defer func() { _ = unix.Close(tfd) }()
	}
	if err := x.clear(pfd, base, false); err != nil {
		return err
	}
	if err := unix.Linkat(tfd, tbase, pfd, base, 0); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("hard link to %q: no such file earlier in this layer", hdr.Linkname)
		}
		return err
	}
	return nil
}

// meta sets an open file's or directory's owner, mode (setuid, setgid
// and sticky bits included: chown first, which clears them), xattrs and
// times (a directory's at the end, after its entries).
func (x *extractor) meta(fd int, hdr *tar.Header, dir bool) error {
	if hdr.Uid != 0 || hdr.Gid != 0 || !x.uid0 {
		if err := unix.Fchown(fd, hdr.Uid, hdr.Gid); err != nil {
			return fmt.Errorf("chown: %w", err)
		}
	}
	if err := unix.Fchmod(fd, uint32(hdr.Mode&0o7777)); err != nil {
		return fmt.Errorf("chmod: %w", err)
	}
	for k, v := range hdr.PAXRecords {
		if attr, ok := strings.CutPrefix(k, paxXattr); ok && keepXattr(attr) {
			if err := unix.Fsetxattr(fd, attr, []byte(v), 0); err != nil {
				return fmt.Errorf("set xattr %s: %w", attr, err)
			}
		}
	}
	ts := times(hdr)
	if dir {
		name := "."
		if fd != x.root {
			name = path.Clean("/" + hdr.Name)[1:]
		}
		x.times = append(x.times, dirTime{name: name, ts: ts})
		return nil
	}
	return unix.UtimesNanoAt(fd, "", ts, unix.AT_EMPTY_PATH)
}

// metaAt is meta for what cannot be opened: symlinks and fifos.
func (x *extractor) metaAt(pfd int, base string, hdr *tar.Header) error {
	if hdr.Uid != 0 || hdr.Gid != 0 || !x.uid0 {
		if err := unix.Fchownat(pfd, base, hdr.Uid, hdr.Gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return fmt.Errorf("chown: %w", err)
		}
	}
	if hdr.Typeflag == tar.TypeFifo {
		if err := unix.Fchmodat(pfd, base, uint32(hdr.Mode&0o777), 0); err != nil {
			return fmt.Errorf("chmod: %w", err)
		}
	}
	return unix.UtimesNanoAt(pfd, base, times(hdr), unix.AT_SYMLINK_NOFOLLOW)
}

// finish sets the directories' times, deepest last-made first, now that
// nothing is added to them.
func (x *extractor) finish() error {
	x.forget()
	for i := len(x.times) - 1; i >= 0; i-- {
		t := x.times[i]
		if t.name == "." {
			if err := unix.UtimesNanoAt(x.root, ".", t.ts, 0); err != nil {
				return err
			}
			continue
		}
		dir, base := path.Split(t.name)
		pfd := x.root
		if dir = path.Clean("/" + dir)[1:]; dir != "" {
			fd, err := unix.Openat2(x.root, dir, &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: resolveInLayer})
			if err != nil {
				continue // replaced or removed by a later entry
			}
			pfd = fd
		}
		err := unix.UtimesNanoAt(pfd, base, t.ts, unix.AT_SYMLINK_NOFOLLOW)
		if pfd != x.root {
			_ = unix.Close(pfd)
		}
		if err != nil && !errors.Is(err, unix.ENOENT) {
			return err
		}
	}
	return nil
}

func times(hdr *tar.Header) []unix.Timespec {
	at := hdr.AccessTime
	if at.IsZero() {
		at = hdr.ModTime
	}
	return []unix.Timespec{timespec(at), timespec(hdr.ModTime)}
}

func timespec(t time.Time) unix.Timespec {
	if t.IsZero() {
		return unix.Timespec{Sec: 0}
	}
	return unix.NsecToTimespec(t.UnixNano())
}

// syncFS flushes the file system dir is on: one call makes a whole
// unpacked layer durable before its rename.
func syncFS(dir string) error {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer func() { _ = unix.Close(fd) }()
	return unix.Syncfs(fd)
}
