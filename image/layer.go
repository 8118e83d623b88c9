package image

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/brimnode/brim/internal/atomicfile"
)

// layerMeta is layers/sha256/HEX/layer.json, beside the unpacked fs/.
type layerMeta struct {
	DiffID   string
	Digest   string
	Size     int64
	Entries  int
	Unpacked time.Time
}

// layerSpec is one layer to unpack: its digests as the manifest and the
// config name them, and how to read its blob.
type layerSpec struct {
	Ref    string // the reference pulled, for errors
	DiffID string
	Digest string // the blob's digest; equal to DiffID for an uncompressed blob
	Size   int64  // the blob's size, -1 when unknown
	Open   func() (io.ReadCloser, error)
}

// unpackStats is what unpack counts.
type unpackStats struct {
	Size    int64 // file sizes rounded up to 4 KiB, plus 4 KiB per other entry
	Entries int
}

// ensureLayer makes l's unpacked directory exist, once however many pulls
// ask at the same time. It returns the blob bytes it fetched: 0 when the
// layer was there already or another pull fetched it.
func (s *Store) ensureLayer(ctx context.Context, l layerSpec) (int64, error) {
	for attempt := 0; ; attempt++ {
		n, err := s.ensureLayerOnce(ctx, l)
		if attempt < 2 && cancelledElsewhere(ctx, err) {
			continue
		}
		return n, err
	}
}

// cancelledElsewhere reports a shared call ended by the context of the
// caller that ran it, while this caller's context is live: run it again.
func cancelledElsewhere(ctx context.Context, err error) bool {
	return ctx.Err() == nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded))
}

func (s *Store) ensureLayerOnce(ctx context.Context, l layerSpec) (int64, error) {
	var fetched int64
	_, err, _ := s.unpacks.Do(l.DiffID, func() (any, error) {
		s.mu.Lock()
		_, ok := s.layers[l.DiffID]
		s.mu.Unlock()
		if ok {
			return nil, nil
		}
		n, meta, err := s.fetchLayer(ctx, l)
		fetched = n
		if err != nil {
			return nil, err
		}
		s.mu.Lock()
		s.layers[l.DiffID] = meta.Size
		s.mu.Unlock()
		return nil, nil
	})
	return fetched, err
}

// fetchLayer streams the blob through both digests into a temporary
// directory and renames it into place only when both match and the
// files are on disk: a layer directory exists whole or not at all.
func (s *Store) fetchLayer(ctx context.Context, l layerSpec) (int64, layerMeta, error) {
	tmp, err := os.MkdirTemp(filepath.Join(s.root, dirTmp), "layer-")
	if err != nil {
		return 0, layerMeta{}, fmt.Errorf("unpack layer %s: %w", l.Digest, err)
	}
	meta, n, err := s.unpackInto(ctx, tmp, l)
	if err == nil {
		err = s.commitLayer(tmp, l.DiffID)
	}
	if err != nil {
		_ = os.RemoveAll(tmp)
		return n, layerMeta{}, err
	}
	return n, meta, nil
}

func (s *Store) unpackInto(ctx context.Context, tmp string, l layerSpec) (layerMeta, int64, error) {
	rc, err := l.Open()
	if err != nil {
		return layerMeta{}, 0, fmt.Errorf("fetch layer %s: %w", l.Digest, classify(err))
	}
	defer rc.Close()
	blob := newHashReader(rc)
	stats, err := unpackBlob(ctx, filepath.Join(tmp, "fs"), blob, l)
	if err != nil {
		if derr := blob.drainCheck(l); derr != nil {
			return layerMeta{}, blob.n, derr
		}
		return layerMeta{}, blob.n, err
	}
	if got := blob.digest(); got != l.Digest {
		return layerMeta{}, blob.n, &DigestError{Ref: l.Ref, What: "layer", Want: l.Digest, Got: got}
	}
	meta := layerMeta{DiffID: l.DiffID, Digest: l.Digest, Size: stats.Size, Entries: stats.Entries, Unpacked: s.now()}
	b, err := json.Marshal(meta)
	if err == nil {
		err = os.WriteFile(filepath.Join(tmp, "layer.json"), b, 0o600)
	}
	if err == nil {
		err = syncFS(tmp)
	}
	if err != nil {
		return layerMeta{}, blob.n, fmt.Errorf("unpack layer %s: %w", l.Digest, err)
	}
	return meta, blob.n, nil
}

// unpackBlob decompresses the blob, unpacks the tar and checks the
// uncompressed digest (the config's diff ID) over every byte, the tar's
// trailing padding included.
func unpackBlob(ctx context.Context, dir string, blob io.Reader, l layerSpec) (unpackStats, error) {
	br := bufio.NewReaderSize(blob, 1<<20)
	dec, err := decompress(br)
	if err != nil {
		return unpackStats{}, fmt.Errorf("layer %s: %w", l.Digest, err)
	}
	defer dec.Close()
	tarStream := newHashReader(dec)
	stats, err := unpack(ctx, dir, tarStream)
	if err == nil {
		_, err = io.Copy(io.Discard, tarStream)
	}
	if err != nil {
		return stats, fmt.Errorf("unpack layer %s: %w", l.Digest, err)
	}
	if got := tarStream.digest(); got != l.DiffID {
		return stats, &DigestError{Ref: l.Ref, What: "layer (uncompressed)", Want: l.DiffID, Got: got}
	}
	return stats, nil
}

// decompress detects gzip and zstd by their magic numbers; anything else
// is read as a plain tar (which the tar reader then checks).
func decompress(br *bufio.Reader) (io.ReadCloser, error) {
	magic, err := br.Peek(4)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("read layer: %w", err)
	}
	switch {
	case len(magic) >= 2 && magic[0] == 0x1f && magic[1] == 0x8b:
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		return labelled{zr, "gzip"}, nil
	case len(magic) == 4 && magic[0] == 0x28 && magic[1] == 0xb5 && magic[2] == 0x2f && magic[3] == 0xfd:
		zr, err := zstd.NewReader(br, zstd.WithDecoderConcurrency(1))
		if err != nil {
			return nil, fmt.Errorf("zstd: %w", err)
		}
		return labelled{zr.IOReadCloser(), "zstd"}, nil
	}
	return io.NopCloser(br), nil
}

// labelled names the decompressor in its errors ("gzip: flate: corrupt
// input"), which the tar reader passes on.
type labelled struct {
	io.ReadCloser
	name string
}

func (l labelled) Read(p []byte) (int, error) {
	n, err := l.ReadCloser.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		err = fmt.Errorf("%s: %w", l.name, err)
	}
	return n, err
}

// commitLayer renames the finished temporary directory into place and
// makes the rename durable.
func (s *Store) commitLayer(tmp, diffID string) error {
	dst := filepath.Join(s.root, dirLayers, hexOf(diffID))
	if err := os.Rename(tmp, dst); err != nil {
		return fmt.Errorf("commit layer %s: %w", diffID, err)
	}
	return syncDir(filepath.Dir(dst))
}

func syncDir(dir string) error {
	// atomicfile.Remove of a missing name fsyncs the directory: the one
	// place the project syncs directories.
	return atomicfile.Remove(filepath.Join(dir, ".sync"))
}

// hashReader hashes and counts what is read through it.
type hashReader struct {
	r io.Reader
	h hash.Hash
	n int64
}

func newHashReader(r io.Reader) *hashReader { return &hashReader{r: r, h: sha256.New()} }

func (h *hashReader) Read(p []byte) (int, error) {
	n, err := h.r.Read(p)
	h.h.Write(p[:n])
	h.n += int64(n)
	return n, err
}

func (h *hashReader) digest() string { return "sha256:" + hex.EncodeToString(h.h.Sum(nil)) }

// drainCheck reads the rest of a blob whose unpacking failed and returns
// a *DigestError when it does not hash to its digest: content that is
// not what was named is the cause to report, whatever broke first (a
// gzip header, a tar entry). Nil when the blob is what it should be, its
// size is unknown, or it cannot be read to its end.
func (h *hashReader) drainCheck(l layerSpec) error {
	if l.Size < 0 || h.n > l.Size {
		return nil
	}
	if _, err := io.Copy(io.Discard, io.LimitReader(h, l.Size-h.n)); err != nil && h.n != l.Size {
		return nil
	}
	if got := h.digest(); h.n == l.Size && got != l.Digest {
		return &DigestError{Ref: l.Ref, What: "layer", Want: l.Digest, Got: got}
	}
	return nil
}
