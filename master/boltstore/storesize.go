package boltstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
)

// bbolt's on-disk layout (go.etcd.io/bbolt internal/common: page.go,
// meta.go), read here before bbolt maps the file. bbolt maps a file
// rounded up to at least 32 KiB and trusts its meta pages: a file cut
// short after a kill -9 (32 KiB cut to 16 KiB) has its freelist page
// inside the mapping but past the end of the file, and reading it is a
// SIGBUS, which no recover can catch (`fatal error: fault` in bbolt's
// freelist read). The file's size is checked against the meta page
// bbolt would use first.
const (
	boltPageHeader   = 16 // id uint64, flags uint16, count uint16, overflow uint32
	boltMetaSize     = 64 // magic … txid, checksum
	boltMetaSummed   = 56 // the bytes the checksum covers (up to checksum)
	boltMagic        = 0xED0CDAED
	boltVersion      = 2
	boltNoFreelist   = ^uint64(0)
	boltMinFirstMeta = boltPageHeader + boltMetaSize
)

// boltMeta is the part of a bbolt meta page the size check reads.
type boltMeta struct {
	pageSize             uint32
	root, freelist, pgid uint64 // pgid: the high-water mark, pages in use
	txid                 uint64
}

// parseBoltMeta reads the meta of the page in b (the page header first);
// ok is false when it is not a valid meta (magic, version, checksum), as
// bbolt's Meta.Validate says.
func parseBoltMeta(b []byte) (m boltMeta, ok bool) {
	if len(b) < boltMinFirstMeta {
		return m, false
	}
	b = b[boltPageHeader : boltPageHeader+boltMetaSize]
	le := binary.NativeEndian // bbolt writes its pages in the machine's order
	if le.Uint32(b[0:]) != boltMagic || le.Uint32(b[4:]) != boltVersion {
		return m, false
	}
	h := fnv.New64a()
	_, _ = h.Write(b[:boltMetaSummed])
	if h.Sum64() != le.Uint64(b[boltMetaSummed:]) {
		return m, false
	}
	m = boltMeta{pageSize: le.Uint32(b[8:]), root: le.Uint64(b[16:]), freelist: le.Uint64(b[32:]), pgid: le.Uint64(b[40:]), txid: le.Uint64(b[48:])}
	return m, m.pageSize >= boltMinFirstMeta
}

// errStoreTruncated: the file is shorter than its meta page says.
var errStoreTruncated = errors.New("the file is shorter than its meta page says")

// checkBoltSize checks that the bbolt file at path holds every page its
// current meta page names (the high-water mark, the root bucket and the
// freelist with its overflow pages), so that mapping it cannot fault. It
// returns nil when the meta pages are not valid: bbolt itself then
// refuses the file (ErrInvalid, ErrChecksum). Errors wrap
// errStoreTruncated, or are the file's read errors.
func checkBoltSize(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	size := fi.Size()
	readAt := func(off int64, n int) []byte {
		b := make([]byte, n)
		if k, _ := f.ReadAt(b, off); k < n {
			return b[:k]
		}
		return b
	}
	// Meta 0 sits at offset 0 and gives the page size; meta 1 one page
	// later. bbolt uses the valid meta with the higher transaction ID.
	m0, ok0 := parseBoltMeta(readAt(0, boltMinFirstMeta))
	var metas []boltMeta
	if ok0 {
		metas = append(metas, m0)
		if m1, ok := parseBoltMeta(readAt(int64(m0.pageSize), boltMinFirstMeta)); ok {
			metas = append(metas, m1)
		}
	} else {
		for _, ps := range []int64{4096, 8192, 16384, 32768, 65536} {
			if m1, ok := parseBoltMeta(readAt(ps, boltMinFirstMeta)); ok && int64(m1.pageSize) == ps {
				metas = append(metas, m1)
				break
			}
		}
	}
	if len(metas) == 0 {
		return nil // bbolt refuses it with its own error
	}
	m := metas[0]
	if len(metas) == 2 && metas[1].txid > m.txid {
		m = metas[1]
	}
	ps := int64(m.pageSize)
	if size < 2*ps {
		return fmt.Errorf("%w: %d bytes, less than its two meta pages of %d bytes: the file was cut short", errStoreTruncated, size, ps)
	}
	if m.pgid > uint64(size/ps) {
		return fmt.Errorf("%w: %d bytes, its meta page (transaction %d) uses %d pages of %d bytes (%d bytes): the file was cut short",
			errStoreTruncated, size, m.txid, m.pgid, ps, m.pgid*uint64(ps))
	}
	if m.root >= m.pgid {
		return fmt.Errorf("%w: its meta page (transaction %d) puts the root bucket at page %d, past its %d pages", errStoreTruncated, m.txid, m.root, m.pgid)
	}
	if m.freelist == boltNoFreelist {
		return nil
	}
	if m.freelist >= m.pgid {
		return fmt.Errorf("%w: its meta page (transaction %d) puts the freelist at page %d, past its %d pages", errStoreTruncated, m.txid, m.freelist, m.pgid)
	}
	hdr := readAt(int64(m.freelist)*ps, boltPageHeader)
	if len(hdr) < boltPageHeader {
		return fmt.Errorf("%w: %d bytes, the freelist page %d is missing: the file was cut short", errStoreTruncated, size, m.freelist)
	}
	if last := m.freelist + uint64(binary.NativeEndian.Uint32(hdr[12:])); last >= m.pgid || int64(last+1)*ps > size {
		return fmt.Errorf("%w: %d bytes, the freelist (pages %d to %d) runs past the end of the file or of its %d pages: the file was cut short or damaged",
			errStoreTruncated, size, m.freelist, last, m.pgid)
	}
	return nil
}
