package executor

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"

	devices "github.com/opencontainers/cgroups/devices/config"
	"github.com/opencontainers/runc/libcontainer/configs"
	"golang.org/x/sys/unix"

	"github.com/brimnode/brim/internal/osthread"
)

// A readySet is what a warm shim makes for its next container while it
// waits for one: work every cold launch would otherwise do on its path,
// inside libcontainer, the same for every container without a user
// namespace.
//
//   - The network, IPC and UTS namespaces. libcontainer's nsexec
//     unshares them (a network namespace alone ≈ 0.5–0.7 ms here: the
//     network stack's per-namespace state), and its init brings the
//     loopback up (≈ 0.3 ms of netlink). Given by path, nsexec joins
//     them (setns) and the init finds the loopback up.
//   - The /dev tmpfs with its device nodes and the /dev/pts, /dev/shm
//     and /dev/mqueue mounts in it, the /tmp tmpfs, and /sys: the init
//     makes each through libcontainer's checked path lookups inside the
//     rootfs (≈ 0.2 ms of its CPU each, and the nodes as much as /dev).
//     Here they are detached mounts (fsmount), made where nothing else
//     can reach them; /dev/mqueue and /sys by the thread that made the
//     namespaces, in them (an mqueue file system shows its IPC
//     namespace's queues, a sysfs its network namespace's interfaces).
//     At the launch the shim attaches them in its private mount
//     namespace (move_mount onto a directory opened in the rootfs
//     without following symlinks), the container's mount namespace is
//     copied from it with them, and the shim detaches its own copies
//     once libcontainer's start returns.
//
// The container cannot tell. Every namespace and mount is new, made by
// the same host root in the same user namespace as libcontainer's would
// be, from a plain container's libcontainer config (readyTemplate: each
// mount's kind, source, options and flags, each node's type, numbers,
// mode and owner), and a launch takes only what its own config asks for
// in the same terms (apply compares them): libcontainer makes the rest. A container with a user namespace gets none of
// it: its root must own its namespaces and its mounts, and its mappings
// are only known at its launch. Neither does a container that joins a
// network namespace (the network isolator's) get the namespaces, nor the
// mounts made in them.
//
// Nothing else ever enters the namespaces: the thread that made them
// ends with its goroutine. A set serves one container: once any part of
// it was given to a launch, the shim closes it after libcontainer's
// start (the container holds what it uses from then on) and makes a new
// one before it takes another container.
type readySet struct {
	ns      [len(readyKinds)]*os.File // nil when not made
	mounts  []*readyMount             // nil when not made
	devices []*devices.Device         // the nodes made in the /dev mount
	used    bool                      // given to a launch: close after its start
}

// readyKinds are the namespaces a set holds, in /proc's names.
var readyKinds = [...]struct {
	typ  configs.NamespaceType
	name string
}{
	{configs.NEWNET, "net"},
	{configs.NEWIPC, "ipc"},
	{configs.NEWUTS, "uts"},
}

// readyGroup is mounts of a set attached together or not at all: the
// first on its mount point in the rootfs (or in the mount of the set
// whose destination is in), the others in the first.
type readyGroup struct {
	dests []string
	in    string
	inNS  bool // made in the set's namespaces: only for a launch that takes them
}

// readyGroups are the mounts a set holds, in the order they are
// attached.
var readyGroups = []readyGroup{
	{dests: []string{"/dev", "/dev/pts", "/dev/shm"}},
	{dests: []string{"/tmp"}},
	{dests: []string{"/dev/mqueue"}, in: "/dev", inNS: true},
	{dests: []string{"/sys"}, inNS: true},
}

// readyDests are the destinations of readyGroups' mounts, made in the
// set's namespaces (ns) or not.
func readyDests(ns bool) []string {
	var out []string
	for _, g := range readyGroups {
		if g.inNS == ns {
			out = append(out, g.dests...)
		}
	}
	return out
}

// readyMount is one detached mount of a set.
type readyMount struct {
	want     configs.Mount // the config entry it stands for
	fd       *os.File      // fsmount's: the mount's root
	attached bool
}

// errNotReady says why a launch did not get (part of) a set; for tests.
var errNotReady = errors.New("not made ahead for this container")

// makeReadySet makes a set for containers configured as template (a
// plain container's libcontainer config: RuntimeSpec's mounts and
// devices). A part that cannot be made (no permission to mount or
// unshare, an old kernel) is left out, with the reason in err.
func makeReadySet(template *configs.Config) (*readySet, error) {
	r := &readySet{}
	var errs []error
	if err := r.makeNamespaces(template); err != nil {
		errs = append(errs, err)
	}
	if err := r.makeMounts(template); err != nil {
		errs = append(errs, err)
	}
	if r.held() == 0 {
		return nil, fmt.Errorf("make namespaces and mounts ahead: %w", errors.Join(errs...))
	}
	if len(errs) > 0 {
		return r, fmt.Errorf("make namespaces and mounts ahead: %w", errors.Join(errs...))
	}
	return r, nil
}

// makeNamespaces unshares the set's namespaces on a thread of its own
// (internal/osthread), brings the loopback up, opens them, makes the
// mounts that belong to them (template's), and lets the thread end.
func (r *readySet) makeNamespaces(template *configs.Config) error {
	var nsMounts []*readyMount
	err := osthread.Run(func() error {
		if err := r.unshareNamespaces(); err != nil {
			return err
		}
		var err error
		nsMounts, err = makeMounts(template, readyDests(true))
		return err
	})
	if err != nil {
		r.closeNamespaces()
		closeAll(nsMounts)
		return fmt.Errorf("namespaces: %w", err)
	}
	r.mounts = append(r.mounts, nsMounts...)
	return nil
}

func (r *readySet) unshareNamespaces() error {
	if err := unix.Unshare(unix.CLONE_NEWNET | unix.CLONE_NEWIPC | unix.CLONE_NEWUTS); err != nil {
		return fmt.Errorf("unshare: %w", err)
	}
	if err := loopbackUp(); err != nil {
		return err
	}
	for i, k := range readyKinds {
		f, err := os.OpenFile("/proc/thread-self/ns/"+k.name, os.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		r.ns[i] = f
	}
	return nil
}

// loopbackUp sets the calling thread's network namespace's loopback up,
// as libcontainer's init does in a network namespace nsexec made.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("loopback up: %w", err)
	}
	defer func() { _ = unix.Close(fd) }()
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return fmt.Errorf("loopback up: %w", err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("loopback up: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("loopback up: %w", err)
	}
	return nil
}

// makeMounts makes the mounts that are not made in the namespaces (the
// /dev tmpfs with the device nodes and its submounts' mount points,
// /tmp), as template has them.
func (r *readySet) makeMounts(template *configs.Config) error {
	ms, err := makeMounts(template, readyDests(false))
	if err == nil {
		r.mounts = append(r.mounts, ms...)
		err = r.populateDev(template)
	}
	if err != nil {
		r.closeMounts()
		return fmt.Errorf("mounts: %w", err)
	}
	return nil
}

// makeMounts makes template's entries for dests as detached mounts.
func makeMounts(template *configs.Config, dests []string) ([]*readyMount, error) {
	var out []*readyMount
	for _, dest := range dests {
		m := findMount(template.Mounts, dest)
		if m == nil {
			closeAll(out)
			return nil, fmt.Errorf("the template has no %s", dest)
		}
		fd, err := detachedMount(m)
		if err != nil {
			closeAll(out)
			return nil, fmt.Errorf("%s: %w", dest, err)
		}
		out = append(out, &readyMount{want: *m, fd: fd})
	}
	return out, nil
}

func closeAll(ms []*readyMount) {
	for _, m := range ms {
		m.fd.Close()
	}
}

// populateDev makes in the /dev mount the mount points of template's
// mounts in it and template's device nodes but /dev/ptmx.
func (r *readySet) populateDev(template *configs.Config) error {
	dev := r.mount("/dev")
	for _, m := range template.Mounts {
		if sub, ok := strings.CutPrefix(m.Destination, "/dev/"); ok {
			// libcontainer would make these (mkdir in the rootfs,
			// 0755) for its own mounts too.
			if sub == "" || strings.Contains(sub, "/") {
				return fmt.Errorf("mount point %s is not directly in /dev", m.Destination)
			}
			if err := mkdirExact(dev.fd, sub, 0o755); err != nil {
				return err
			}
		}
	}
	_, nodes := splitPtmx(template.Devices)
	for _, d := range nodes {
		if err := mknodExact(dev.fd, d); err != nil {
			return err
		}
		r.devices = append(r.devices, d)
	}
	return nil
}

// detachedMount makes m's file system as a mount attached nowhere.
func detachedMount(m *configs.Mount) (*os.File, error) {
	attrs, ok := mountAttrs(m.Flags)
	if !ok || m.ClearedFlags != 0 || len(m.PropagationFlags) != 0 || m.Extensions != 0 ||
		m.IDMapping != nil || m.RecAttr != nil {
		return nil, fmt.Errorf("mount options other than a new file system's (flags %#x)", m.Flags)
	}
	fsfd, err := unix.Fsopen(m.Device, unix.FSOPEN_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("fsopen %s: %w", m.Device, err)
	}
	defer func() { _ = unix.Close(fsfd) }()
	if err := unix.FsconfigSetString(fsfd, "source", m.Source); err != nil {
		return nil, fmt.Errorf("fsconfig source: %w", err)
	}
	if m.Flags&unix.MS_RDONLY != 0 {
		// mount(2) makes a new file system read-only with MS_RDONLY,
		// as well as the mount; fsmount's attribute is the mount's.
		if err := unix.FsconfigSetFlag(fsfd, "ro"); err != nil {
			return nil, fmt.Errorf("fsconfig ro: %w", err)
		}
	}
	for _, opt := range strings.Split(m.Data, ",") {
		if opt == "" {
			continue
		}
		if k, v, ok := strings.Cut(opt, "="); ok {
			err = unix.FsconfigSetString(fsfd, k, v)
		} else {
			err = unix.FsconfigSetFlag(fsfd, k)
		}
		if err != nil {
			return nil, fmt.Errorf("fsconfig %s: %w", opt, err)
		}
	}
	if err := unix.FsconfigCreate(fsfd); err != nil {
		return nil, fmt.Errorf("fsconfig create: %w", err)
	}
	fd, err := unix.Fsmount(fsfd, unix.FSMOUNT_CLOEXEC, attrs)
	if err != nil {
		return nil, fmt.Errorf("fsmount: %w", err)
	}
	return os.NewFile(uintptr(fd), m.Destination), nil
}

// mountAttrs maps mount(2) flags to fsmount's attributes; false for a
// flag fsmount has none for (a bind, a propagation, a remount).
func mountAttrs(flags int) (int, bool) {
	known := []struct{ flag, attr int }{
		{unix.MS_RDONLY, unix.MOUNT_ATTR_RDONLY},
		{unix.MS_NOSUID, unix.MOUNT_ATTR_NOSUID},
		{unix.MS_NODEV, unix.MOUNT_ATTR_NODEV},
		{unix.MS_NOEXEC, unix.MOUNT_ATTR_NOEXEC},
		{unix.MS_NOATIME, unix.MOUNT_ATTR_NOATIME},
		{unix.MS_STRICTATIME, unix.MOUNT_ATTR_STRICTATIME},
		{unix.MS_NODIRATIME, unix.MOUNT_ATTR_NODIRATIME},
		{unix.MS_RELATIME, unix.MOUNT_ATTR_RELATIME},
	}
	attrs := 0
	for _, k := range known {
		if flags&k.flag != 0 {
			attrs |= k.attr
			flags &^= k.flag
		}
	}
	return attrs, flags == 0
}

// mkdirExact makes directory name in dir with exactly mode (no umask),
// as libcontainer's MkdirAllInRoot leaves a mount point.
func mkdirExact(dir *os.File, name string, mode uint32) error {
	if err := unix.Mkdirat(int(dir.Fd()), name, mode); err != nil {
		return fmt.Errorf("mkdir %s: %w", name, err)
	}
	if err := unix.Fchmodat(int(dir.Fd()), name, mode, 0); err != nil {
		return fmt.Errorf("chmod %s: %w", name, err)
	}
	return nil
}

// mknodExact makes d's node in the /dev mount dir as libcontainer's
// mknodDevice does: its type and numbers, exactly its mode, its owner.
func mknodExact(dir *os.File, d *devices.Device) error {
	name, ok := strings.CutPrefix(d.Path, "/dev/")
	if !ok || name == "" || strings.Contains(name, "/") {
		return fmt.Errorf("device %s is not directly in /dev", d.Path)
	}
	mode := uint32(d.FileMode.Perm())
	switch d.Type {
	case devices.CharDevice:
		mode |= unix.S_IFCHR
	case devices.BlockDevice:
		mode |= unix.S_IFBLK
	case devices.FifoDevice:
		mode |= unix.S_IFIFO
	default:
		return fmt.Errorf("device %s: type %c", d.Path, d.Type)
	}
	dev, err := d.Mkdev()
	if err != nil {
		return fmt.Errorf("device %s: %w", d.Path, err)
	}
	fd := int(dir.Fd())
	if err := unix.Mknodat(fd, name, mode, int(dev)); err != nil {
		return fmt.Errorf("mknod %s: %w", d.Path, err)
	}
	if err := unix.Fchmodat(fd, name, mode&^unix.S_IFMT, 0); err != nil {
		return fmt.Errorf("chmod %s: %w", d.Path, err)
	}
	if err := unix.Fchownat(fd, name, int(d.Uid), int(d.Gid), unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("chown %s: %w", d.Path, err)
	}
	return nil
}

// apply gives cfg, a container's config whose root is rootfs, what of
// the set it can take, and reports what it did not take and why. Once
// anything was given, the set must be closed after libcontainer's start
// (whether it succeeded or not).
func (r *readySet) apply(cfg *configs.Config, rootfs string) error {
	if r == nil {
		return fmt.Errorf("%w: nothing made", errNotReady)
	}
	if cfg.Namespaces.Contains(configs.NEWUSER) {
		return fmt.Errorf("%w: the container has a user namespace", errNotReady)
	}
	errNS := r.applyNamespaces(cfg)
	errMounts := r.applyMounts(cfg, rootfs, errNS == nil)
	return errors.Join(errNS, errMounts)
}

func (r *readySet) applyNamespaces(cfg *configs.Config) error {
	if r.ns[0] == nil {
		return fmt.Errorf("%w: no namespaces made", errNotReady)
	}
	for _, k := range readyKinds {
		if !cfg.Namespaces.IsPrivate(k.typ) {
			return fmt.Errorf("%w: the container does not make its own %s namespace", errNotReady, k.name)
		}
	}
	if len(cfg.Networks) != 1 || cfg.Networks[0].Type != "loopback" {
		return fmt.Errorf("%w: networks other than the loopback", errNotReady)
	}
	pid := os.Getpid()
	for i, k := range readyKinds {
		for j := range cfg.Namespaces {
			if cfg.Namespaces[j].Type == k.typ {
				// The shim's own entry: nsexec opens it from the init,
				// the shim's child, before that leaves the shim's mount
				// and pid namespaces.
				cfg.Namespaces[j].Path = fmt.Sprintf("/proc/%d/fd/%d", pid, r.ns[i].Fd())
			}
		}
	}
	cfg.Networks = nil // the loopback is up
	r.used = true
	return nil
}

// applyMounts attaches what it can of the set's mounts for cfg (those
// made in the namespaces only when cfg took them: withNS).
func (r *readySet) applyMounts(cfg *configs.Config, rootfs string, withNS bool) error {
	if r.mount("/dev") == nil {
		return fmt.Errorf("%w: no mounts made", errNotReady)
	}
	ptmx, nodes := splitPtmx(cfg.Devices)
	if !slices.EqualFunc(nodes, r.devices, func(a, b *devices.Device) bool { return *a == *b }) {
		return fmt.Errorf("%w: the container's devices differ", errNotReady)
	}
	if err := makeMountsPrivate(); err != nil {
		return err
	}
	var errs []error
	for _, g := range readyGroups {
		switch {
		case g.inNS && !withNS:
			errs = append(errs, fmt.Errorf("%w: %s belongs to the namespaces", errNotReady, g.dests[0]))
			continue
		case g.in != "" && !r.mount(g.in).attached:
			errs = append(errs, fmt.Errorf("%w: %s has no %s to go in", errNotReady, g.dests[0], g.in))
			continue
		case r.mount(g.dests[0]) == nil:
			errs = append(errs, fmt.Errorf("%w: no %s made", errNotReady, g.dests[0]))
			continue
		}
		if err := r.attachGroup(cfg, rootfs, g); err != nil {
			errs = append(errs, err)
			continue
		}
		if g.dests[0] == "/dev" {
			cfg.Devices = ptmx // the others are made in the attached /dev
		}
	}
	return errors.Join(errs...)
}

// attachGroup attaches g's mounts in the shim's private mount namespace
// and takes their entries out of cfg, or attaches none.
func (r *readySet) attachGroup(cfg *configs.Config, rootfs string, g readyGroup) (err error) {
	group := g.dests
	for _, dest := range group {
		m := findMount(cfg.Mounts, dest)
		if m == nil || !sameMount(m, &r.mount(dest).want) {
			return fmt.Errorf("%w: the container's %s differs", errNotReady, dest)
		}
	}
	root, err := os.OpenFile(rootfs, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("attach %s: %w", group[0], err)
	}
	defer root.Close()
	r.used = true // from here on the mounts may be attached: spent
	defer func() {
		if err != nil {
			r.detach(group)
		}
	}()
	for i, dest := range group {
		rm := r.mount(dest)
		parent, name := root, strings.TrimPrefix(dest, "/")
		switch {
		case i > 0:
			parent, name = r.mount(group[0]).fd, strings.TrimPrefix(dest, group[0]+"/")
		case g.in != "":
			parent, name = r.mount(g.in).fd, strings.TrimPrefix(dest, g.in+"/")
		}
		if err := attach(rm, parent, name); err != nil {
			return fmt.Errorf("attach %s: %w", dest, err)
		}
	}
	for _, dest := range group {
		cfg.Mounts = withoutMount(cfg.Mounts, dest)
	}
	return nil
}

// attach moves rm onto the directory name in parent: name is one path
// component, opened without following a symlink (a link planted in an
// image cannot send the mount elsewhere).
func attach(rm *readyMount, parent *os.File, name string) error {
	fd, err := unix.Openat(int(parent.Fd()), name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open mount point: %w", err)
	}
	defer func() { _ = unix.Close(fd) }()
	if err := unix.MoveMount(int(rm.fd.Fd()), "", fd, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return fmt.Errorf("move_mount: %w", err)
	}
	rm.attached = true
	return nil
}

// detach takes the group's attached mounts out of the shim's mount
// namespace (the container keeps its copies): the first, and the others
// with it (they are only ever attached in it).
func (r *readySet) detach(group []string) {
	if rm := r.mount(group[0]); rm != nil && rm.attached {
		_ = unix.Unmount(fmt.Sprintf("/proc/self/fd/%d", rm.fd.Fd()), unix.MNT_DETACH)
	}
	for _, dest := range group {
		if m := r.mount(dest); m != nil {
			m.attached = false
		}
	}
}

// release ends a launch's use of the set, after libcontainer's start:
// the shim's copies of the mounts are detached and everything is
// closed. A set that was not used is kept for the next container.
func (r *readySet) release() {
	if r == nil || !r.used {
		return
	}
	r.close()
}

// close detaches and closes everything the set holds.
func (r *readySet) close() {
	if r == nil {
		return
	}
	r.closeNamespaces()
	r.closeMounts()
}

func (r *readySet) closeNamespaces() {
	for i, f := range r.ns {
		if f != nil {
			f.Close()
			r.ns[i] = nil
		}
	}
}

func (r *readySet) closeMounts() {
	for i := len(readyGroups) - 1; i >= 0; i-- {
		r.detach(readyGroups[i].dests)
	}
	closeAll(r.mounts)
	r.mounts, r.devices = nil, nil
}

// held is the number of descriptors the set holds.
func (r *readySet) held() int {
	if r == nil {
		return 0
	}
	n := len(r.mounts)
	for _, f := range r.ns {
		if f != nil {
			n++
		}
	}
	return n
}

func (r *readySet) mount(dest string) *readyMount {
	for _, m := range r.mounts {
		if m.want.Destination == dest {
			return m
		}
	}
	return nil
}

// sameMount reports whether a and b are the same new file system.
func sameMount(a, b *configs.Mount) bool {
	return a.Source == b.Source && a.Destination == b.Destination && a.Device == b.Device &&
		a.Flags == b.Flags && a.ClearedFlags == b.ClearedFlags && a.Data == b.Data &&
		len(a.PropagationFlags) == 0 && len(b.PropagationFlags) == 0 &&
		a.Extensions == b.Extensions && a.IDMapping == nil && b.IDMapping == nil &&
		a.RecAttr == nil && b.RecAttr == nil
}

func findMount(ms []*configs.Mount, dest string) *configs.Mount {
	for _, m := range ms {
		if m.Destination == dest {
			return m
		}
	}
	return nil
}

func withoutMount(ms []*configs.Mount, dest string) []*configs.Mount {
	out := ms[:0]
	for _, m := range ms {
		if m.Destination != dest {
			out = append(out, m)
		}
	}
	return out
}

// splitPtmx splits ds into /dev/ptmx (libcontainer's setupPtmx makes
// that link, never a set) and the others.
func splitPtmx(ds []*devices.Device) (ptmx, others []*devices.Device) {
	for _, d := range ds {
		if d.Path == "/dev/ptmx" {
			ptmx = append(ptmx, d)
		} else {
			others = append(others, d)
		}
	}
	return ptmx, others
}

// readyTemplate is the libcontainer config of a plain container (no user
// namespace, its own network namespace, brim's mounts and devices): what
// a set is made for. Converted once per shim (a recycled one makes a set
// per container); never modified.
var readyTemplate = sync.OnceValues(func() (*configs.Config, error) {
	b := &Bundle{ID: "ready", Args: []string{"true"}, CgroupPath: "/brim-ready", Rootfs: "/"}
	return libcontainerConfig(b, "/", "/")
})
