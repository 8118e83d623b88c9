package testregistry

import (
	"archive/tar"
	"bytes"
	"encoding/base64"
	"io"
	"sort"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Files is a layer's content: path to file body. A path ending in "/"
// is a directory; a body starting with "->" a symlink to the rest.
type Files map[string]string

// TarOf is files as a tar, in path order, dated 2024-05-01.
func TarOf(t testing.TB, files Files) []byte {
	t.Helper()
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	mt := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
	for _, n := range names {
		body := files[n]
		hdr := &tar.Header{Name: n, Mode: 0o644, ModTime: mt, Typeflag: tar.TypeReg, Size: int64(len(body))}
		switch {
		case n[len(n)-1] == '/':
			hdr.Typeflag, hdr.Mode, hdr.Size = tar.TypeDir, 0o755, 0
		case len(body) > 1 && body[:2] == "->":
			hdr.Typeflag, hdr.Linkname, hdr.Mode, hdr.Size = tar.TypeSymlink, body[2:], 0o777, 0
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if hdr.Typeflag == tar.TypeReg {
			if _, err := io.WriteString(tw, body); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// Layer is a gzip-compressed layer of the tar tarball.
func Layer(t testing.TB, tarball []byte) v1.Layer {
	t.Helper()
	l, err := tarballLayer(tarball)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func tarballLayer(b []byte) (v1.Layer, error) {
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(b)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

// Image is an OCI image of layers (bottom first) for platform (os/arch),
// with cfg as its run config.
func Image(t testing.TB, platform string, cfg v1.Config, layers ...v1.Layer) v1.Image {
	t.Helper()
	p, err := v1.ParsePlatform(platform)
	if err != nil {
		t.Fatal(err)
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.AppendLayers(img, layers...)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant = p.OS, p.Architecture, p.Variant
	cf.Config = cfg
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// Index is a multi-arch index of imgs, each under its config's platform.
func Index(t testing.TB, imgs ...v1.Image) v1.ImageIndex {
	t.Helper()
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, img := range imgs {
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		p := cf.Platform()
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img,
			Descriptor: v1.Descriptor{Platform: p, MediaType: types.OCIManifestSchema1}})
	}
	return idx
}

func base64Std(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
