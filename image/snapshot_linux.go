package image

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Mount mounts the snapshot's overlay on target (an existing directory),
// in the caller's mount namespace. It passes each layer with fsconfig's
// lowerdir+ (no length limit), and falls back to mount(2) with Options
// on kernels without it (before 6.8). The caller unmounts it before
// Release.
func (s *Snapshot) Mount(target string) error {
	err := s.fsmount(target)
	if err == nil {
		return nil
	}
	if err2 := unix.Mount("overlay", target, "overlay", 0, s.Options()); err2 != nil {
		return fmt.Errorf("mount snapshot %s on %s: %w (new mount API: %v)", s.ID, target, err2, err)
	}
	return nil
}

func (s *Snapshot) fsmount(target string) error {
	fd, err := unix.Fsopen("overlay", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return err
	}
	defer func() { _ = unix.Close(fd) }()
	for _, l := range s.Lower {
		if err := unix.FsconfigSetString(fd, "lowerdir+", l); err != nil {
			return fmt.Errorf("lowerdir+ %s: %w", l, err)
		}
	}
	if err := unix.FsconfigSetString(fd, "upperdir", s.Upper); err != nil {
		return fmt.Errorf("upperdir: %w", err)
	}
	if err := unix.FsconfigSetString(fd, "workdir", s.Work); err != nil {
		return fmt.Errorf("workdir: %w", err)
	}
	if err := unix.FsconfigCreate(fd); err != nil {
		return fmt.Errorf("create: %w", err)
	}
	mfd, err := unix.Fsmount(fd, unix.FSMOUNT_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("fsmount: %w", err)
	}
	defer func() { _ = unix.Close(mfd) }()
	return unix.MoveMount(mfd, "", unix.AT_FDCWD, target, unix.MOVE_MOUNT_F_EMPTY_PATH)
}
