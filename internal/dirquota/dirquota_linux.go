package dirquota

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// xfs's quota interface (linux/dqblk_xfs.h) and the fsxattr ioctls
// (linux/fs.h); x/sys/unix has neither.
const (
	xfsSuperMagic = 0x58465342
	prjQuota      = 2 // PRJQUOTA
	qXGetQStat    = 'X'<<8 + 5
	qXSetQLim     = 'X'<<8 + 4
	qXGetQuota    = 'X'<<8 + 3
	qPDQEnforced  = 1 << 5 // FS_QUOTA_PDQ_ENFD in qs_flags
	fsDQuotVer    = 1      // FS_DQUOT_VERSION
	fsProjQuota   = 2      // FS_PROJ_QUOTA
	fsDQBSoft     = 1 << 2 // FS_DQ_BSOFT
	fsDQBHard     = 1 << 3 // FS_DQ_BHARD
	basicBlock    = 512    // quota limits count 512-byte blocks

	fsIOCFSGetXattr    = 0x801c581f
	fsIOCFSSetXattr    = 0x401c5820
	fsXFlagProjInherit = 0x200
)

// fsDiskQuota is struct fs_disk_quota.
type fsDiskQuota struct {
	Version, Flags           int8
	FieldMask                uint16
	ID                       uint32
	BlkHard, BlkSoft         uint64
	InoHard, InoSoft         uint64
	BCount, ICount           uint64
	ITimer, BTimer           int32
	IWarns, BWarns           uint16
	ITimerHi, BTimerHi       int8
	RtbTimerHi, Pad2         int8
	RtbHard, RtbSoft, RtbCnt uint64
	RtbTimer                 int32
	RtbWarns                 uint16
	Pad3                     int16
	Pad4                     [8]byte
}

// fsxattr is struct fsxattr.
type fsxattr struct {
	XFlags, ExtSize, NExtents, ProjID, CowExtSize uint32
	Pad                                           [8]byte
}

func qcmd(cmd, typ int) uintptr { return uintptr(cmd<<8 | typ&0xff) }

func quotactl(f *os.File, cmd int, id uint32, addr unsafe.Pointer) error {
	_, _, e := unix.Syscall6(unix.SYS_QUOTACTL_FD, f.Fd(), qcmd(cmd, prjQuota), uintptr(id), uintptr(addr), 0, 0)
	if e != 0 {
		return e
	}
	return nil
}

// Projects sets and reads project quotas on one xfs file system. Safe
// for concurrent use; its owner closes it.
type Projects struct {
	root *os.File // a directory of the file system, for quotactl_fd
	mu   sync.Mutex
	next uint32
}

// Open returns the project quotas of the file system holding dir. It
// returns an error wrapping ErrNotSupported when that is not xfs, or
// xfs without enforced project quotas (mount -o prjquota).
func Open(dir string) (*Projects, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return nil, fmt.Errorf("project quotas on %s: %w", dir, err)
	}
	if st.Type != xfsSuperMagic {
		return nil, fmt.Errorf("project quotas on %s: not xfs: %w", dir, ErrNotSupported)
	}
	f, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("project quotas on %s: %w", dir, err)
	}
	var stat [128]byte // struct fs_quota_stat; qs_flags at offset 2
	if err := quotactl(f, qXGetQStat, 0, unsafe.Pointer(&stat[0])); err != nil {
		f.Close()
		return nil, fmt.Errorf("project quotas on %s: %w: %w", dir, ErrNotSupported, err)
	}
	if flags := uint16(stat[2]) | uint16(stat[3])<<8; flags&qPDQEnforced == 0 {
		f.Close()
		return nil, fmt.Errorf("project quotas on %s: xfs without enforced project quotas (mount -o prjquota): %w", dir, ErrNotSupported)
	}
	return &Projects{root: f, next: FirstProject}, nil
}

// Close releases the file system's fd.
func (p *Projects) Close() error { return p.root.Close() }

// Reserve records id as taken (found on a directory after a restart), so
// that Next never hands it out again.
func (p *Projects) Reserve(id uint32) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if id >= p.next {
		p.next = id + 1
	}
}

// Next hands out a project ID no directory of this process got before.
func (p *Projects) Next() uint32 {
	p.mu.Lock()
	defer p.mu.Unlock()
	id := p.next
	p.next++
	return id
}

// Limit caps the project id at bytes (rounded up to 512-byte blocks)
// and gives it dirs (empty directories on the file system), which their
// new files and subdirectories inherit. Writes beyond the limit fail
// with EDQUOT.
func (p *Projects) Limit(id uint32, bytes int64, dirs ...string) error {
	q := fsDiskQuota{Version: fsDQuotVer, Flags: fsProjQuota, FieldMask: fsDQBHard | fsDQBSoft, ID: id}
	q.BlkHard = uint64((bytes + basicBlock - 1) / basicBlock)
	q.BlkSoft = q.BlkHard
	if err := quotactl(p.root, qXSetQLim, id, unsafe.Pointer(&q)); err != nil {
		return fmt.Errorf("set project %d limit: %w", id, err)
	}
	for _, d := range dirs {
		if err := setProject(d, id); err != nil {
			return err
		}
	}
	return nil
}

// Clear removes project id's limit.
func (p *Projects) Clear(id uint32) error {
	q := fsDiskQuota{Version: fsDQuotVer, Flags: fsProjQuota, FieldMask: fsDQBHard | fsDQBSoft, ID: id}
	if err := quotactl(p.root, qXSetQLim, id, unsafe.Pointer(&q)); err != nil {
		return fmt.Errorf("clear project %d limit: %w", id, err)
	}
	return nil
}

// Usage returns the bytes project id holds.
func (p *Projects) Usage(id uint32) (int64, error) {
	var q fsDiskQuota
	if err := quotactl(p.root, qXGetQuota, id, unsafe.Pointer(&q)); err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ESRCH) {
			return 0, nil
		}
		return 0, fmt.Errorf("project %d usage: %w", id, err)
	}
	return int64(q.BCount) * basicBlock, nil
}

func setProject(dir string, id uint32) error {
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("set project of %s: %w", dir, err)
	}
	defer f.Close()
	var x fsxattr
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, f.Fd(), fsIOCFSGetXattr, uintptr(unsafe.Pointer(&x))); e != 0 {
		return fmt.Errorf("set project of %s: FS_IOC_FSGETXATTR: %w", dir, e)
	}
	x.ProjID = id
	x.XFlags |= fsXFlagProjInherit
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, f.Fd(), fsIOCFSSetXattr, uintptr(unsafe.Pointer(&x))); e != 0 {
		return fmt.Errorf("set project of %s: FS_IOC_FSSETXATTR: %w", dir, e)
	}
	return nil
}

// ProjectID returns dir's project ID (0: none).
func ProjectID(dir string) (uint32, error) {
	f, err := os.Open(dir)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var x fsxattr
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, f.Fd(), fsIOCFSGetXattr, uintptr(unsafe.Pointer(&x))); e != 0 {
		return 0, fmt.Errorf("project of %s: %w", dir, e)
	}
	return x.ProjID, nil
}

// Usage is the disk space the files below dir take (du -s: allocated
// blocks, each hard-linked inode once), without following symlinks or
// crossing into another file system. A file removed during the walk is
// skipped.
func Usage(dir string) (int64, error) {
	var root unix.Stat_t
	if err := unix.Lstat(dir, &root); err != nil {
		return 0, fmt.Errorf("disk usage of %s: %w", dir, err)
	}
	seen := map[[2]uint64]bool{}
	var total int64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			if errors.Is(err, unix.ENOENT) {
				return nil
			}
			return err
		}
		if st.Dev != root.Dev {
			return fs.SkipDir
		}
		if st.Nlink > 1 && !d.IsDir() {
			k := [2]uint64{st.Dev, st.Ino}
			if seen[k] {
				return nil
			}
			seen[k] = true
		}
		total += st.Blocks * 512
		return nil
	})
	if err != nil {
		return total, fmt.Errorf("disk usage of %s: %w", dir, err)
	}
	return total, nil
}
