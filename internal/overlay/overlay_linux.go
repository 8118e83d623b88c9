package overlay

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Mount mounts an overlay of lower (top first) under upper and work on
// target, an existing directory, in the caller's mount namespace. It
// passes each layer with fsconfig's lowerdir+ and falls back to mount(2)
// with Options on kernels without it (before 6.8). The caller unmounts
// it.
func Mount(target string, lower []string, upper, work string) error {
	err := fsmount(target, lower, upper, work)
	if err == nil {
		return nil
	}
	if err2 := unix.Mount("overlay", target, "overlay", 0, Options(lower, upper, work)); err2 != nil {
		return fmt.Errorf("mount overlay on %s: %w (new mount API: %v)", target, err2, err)
	}
	return nil
}

func fsmount(target string, lower []string, upper, work string) error {
	fd, err := unix.Fsopen("overlay", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return err
	}
	defer func() { _ = unix.Close(fd) }()
	for _, l := range lower {
		if err := unix.FsconfigSetString(fd, "lowerdir+", l); err != nil {
			return fmt.Errorf("lowerdir+ %s: %w", l, err)
		}
	}
	if upper != "" {
		if err := unix.FsconfigSetString(fd, "upperdir", upper); err != nil {
			return fmt.Errorf("upperdir: %w", err)
		}
		if err := unix.FsconfigSetString(fd, "workdir", work); err != nil {
			return fmt.Errorf("workdir: %w", err)
		}
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
