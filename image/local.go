package image

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/brimnode/brim/internal/atomicfile"
)

const refNameAnnotation = "org.opencontainers.image.ref.name"

// resolveLayout finds the image in an OCI layout directory: the one
// named src.Name (its ref.name annotation), or the only one; an index
// is resolved to the platform.
func (s *Store) resolveLayout(dir string, src Source) (resolved, error) {
	res := resolved{ref: src.String()}
	p, err := layout.FromPath(dir)
	if err != nil {
		return resolved{}, fmt.Errorf("open OCI layout %s: %w", dir, notFound(err))
	}
	raw, err := os.ReadFile(filepath.Join(dir, "index.json"))
	if err != nil {
		return resolved{}, fmt.Errorf("read OCI layout %s: %w", dir, notFound(err))
	}
	im, err := v1.ParseIndexManifest(bytes.NewReader(raw))
	if err != nil {
		return resolved{}, fmt.Errorf("parse %s/index.json: %w", dir, err)
	}
	var picked []v1.Descriptor
	for _, d := range im.Manifests {
		if src.Name == "" || d.Annotations[refNameAnnotation] == src.Name {
			picked = append(picked, d)
		}
	}
	if len(picked) != 1 {
		if src.Name != "" {
			return resolved{}, fmt.Errorf("OCI layout %s has no image named %q: %w", dir, src.Name, ErrNotFound)
		}
		// Several images: take them as one index, by platform.
		d, err := s.pickPlatform(res.ref, raw)
		if err != nil {
			return resolved{}, err
		}
		picked = []v1.Descriptor{d}
	}
	d := picked[0]
	if d.MediaType.IsIndex() {
		ib, err := p.Bytes(d.Digest)
		if err != nil {
			return resolved{}, fmt.Errorf("read index %s: %w", d.Digest, notFound(err))
		}
		if got := digestOf(ib); got != d.Digest.String() {
			return resolved{}, &DigestError{Ref: res.ref, What: "index", Want: d.Digest.String(), Got: got}
		}
		res.index, res.indexDig = ib, d.Digest.String()
		if d, err = s.pickPlatform(res.ref, ib); err != nil {
			return resolved{}, err
		}
	}
	if res.img, err = p.Image(d.Digest); err != nil {
		return resolved{}, fmt.Errorf("read image %s: %w", d.Digest, notFound(err))
	}
	return res, s.checkManifest(&res, d.Digest.String())
}

// resolveOCIArchive unpacks the archive's layout into the store's
// temporary directory (regular files and directories only) and reads it
// as a layout; cleanup removes the copy.
func (s *Store) resolveOCIArchive(src Source) (resolved, func(), error) {
	dir, err := os.MkdirTemp(filepath.Join(s.root, dirTmp), "oci-archive-")
	if err != nil {
		return resolved{}, nil, err
	}
	cleanup := func() { _ = os.RemoveAll(dir) }
	if err := extractLayout(src.Path, dir); err != nil {
		cleanup()
		return resolved{}, nil, err
	}
	res, err := s.resolveLayout(dir, src)
	if err != nil {
		cleanup()
		return resolved{}, nil, err
	}
	// Blobs are read from the copy while storing: remove it after.
	return res, cleanup, nil
}

func extractLayout(archive, dir string) error {
	f, err := os.Open(archive)
	if err != nil {
		return fmt.Errorf("open OCI archive: %w", notFound(err))
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read OCI archive %s: %w", archive, err)
		}
		if !filepath.IsLocal(hdr.Name) {
			return fmt.Errorf("OCI archive %s: %w", archive, &UnsafeLayerError{Entry: hdr.Name, Reason: "path outside the archive"})
		}
		p := filepath.Join(dir, hdr.Name)
		switch hdr.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(p, 0o700)
		case tar.TypeReg:
			err = writeFileFrom(p, tr)
		default:
			err = &UnsafeLayerError{Entry: hdr.Name, Reason: "an OCI archive holds only files and directories"}
		}
		if err != nil {
			return fmt.Errorf("OCI archive %s: %w", archive, err)
		}
	}
}

func writeFileFrom(p string, r io.Reader) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// resolveDockerArchive reads a `docker save` tar: no manifest, so the
// image is identified by its config's digest and each layer by its diff
// ID, both checked over the bytes read.
func (s *Store) resolveDockerArchive(src Source) (resolved, error) {
	res := resolved{ref: src.String(), uncomp: true}
	var tag *name.Tag
	if src.Name != "" {
		t, err := name.NewTag(src.Name)
		if err != nil {
			return resolved{}, fmt.Errorf("%w: %v", ErrInvalidReference, err)
		}
		tag = &t
	}
	if _, err := os.Stat(src.Path); err != nil {
		return resolved{}, fmt.Errorf("open docker archive: %w", notFound(err))
	}
	img, err := tarball.ImageFromPath(src.Path, tag)
	if err != nil {
		return resolved{}, fmt.Errorf("read docker archive %s: %w", src.Path, err)
	}
	res.img = img
	m, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(src.Path) })
	if err != nil {
		return resolved{}, fmt.Errorf("read docker archive %s: %w", src.Path, err)
	}
	for _, d := range m {
		if tag != nil && !containsTag(d.RepoTags, *tag) {
			continue
		}
		for _, t := range d.RepoTags {
			if ref, err := ParseReference(t); err == nil {
				res.refs = append(res.refs, Normalize(ref))
			}
		}
		break
	}
	return res, nil
}

func containsTag(tags []string, t name.Tag) bool {
	for _, s := range tags {
		if o, err := name.NewTag(s); err == nil && o.Name() == t.Name() {
			return true
		}
	}
	return false
}

func notFound(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: %v", ErrNotFound, err)
	}
	return err
}

// writeBlob stores b under its digest, durably; nil b is nothing.
func (s *Store) writeBlob(b []byte) error {
	if b == nil {
		return nil
	}
	p := filepath.Join(s.root, dirBlobs, hexOf(digestOf(b)))
	if _, err := os.Stat(p); err == nil {
		return nil
	}
	if err := atomicfile.WriteFile(p, b, 0o600); err != nil {
		return fmt.Errorf("store blob: %w", err)
	}
	return nil
}
