package executor

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/opencontainers/runc/libcontainer/configs"
	"golang.org/x/sys/unix"

	"github.com/brimnode/brim/internal/subid"
	"github.com/brimnode/brim/internal/testutil"
)

func TestMountAttrs(t *testing.T) {
	for _, tc := range []struct {
		flags int
		attrs int
		ok    bool
	}{
		{unix.MS_NOSUID | unix.MS_STRICTATIME, unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_STRICTATIME, true},
		{unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC | unix.MS_RDONLY,
			unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV | unix.MOUNT_ATTR_NOEXEC | unix.MOUNT_ATTR_RDONLY, true},
		{0, 0, true},
		{unix.MS_BIND | unix.MS_REC, 0, false},
		{unix.MS_NOSUID | unix.MS_SHARED, unix.MOUNT_ATTR_NOSUID, false},
	} {
		attrs, ok := mountAttrs(tc.flags)
		if ok != tc.ok || ok && attrs != tc.attrs {
			t.Errorf("mountAttrs(%#x) = %#x, %v; want %#x, %v", tc.flags, attrs, ok, tc.attrs, tc.ok)
		}
	}
}

func allReadyDests() []string {
	return append(readyDests(false), readyDests(true)...)
}

// newReadySet makes a set from the plain container's template, closed
// when t ends.
func newReadySet(t *testing.T) *readySet {
	t.Helper()
	testutil.RequireRoot(t)
	template, err := readyTemplate()
	if err != nil {
		t.Fatal(err)
	}
	r, err := makeReadySet(template)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.close)
	return r
}

// TestReadySetMade (issue 35): a set holds new network, IPC and UTS
// namespaces (the loopback up) and, attached nowhere, /dev with the
// template's device nodes (type, numbers, exact mode, owner) and the
// mount points of its submounts, and /tmp: each a new file system of
// the template's kind and options.
func TestReadySetMade(t *testing.T) {
	r := newReadySet(t)
	if r.held() != len(readyKinds)+len(allReadyDests()) {
		t.Fatalf("the set holds %d descriptors", r.held())
	}
	runtime.LockOSThread() // compared with this thread's namespaces
	defer runtime.UnlockOSThread()
	for i, k := range readyKinds {
		self, err := os.Readlink("/proc/thread-self/ns/" + k.name)
		if err != nil {
			t.Fatal(err)
		}
		its, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", r.ns[i].Fd()))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(its, k.name+":[") || its == self {
			t.Errorf("%s namespace: %s (this process's: %s)", k.name, its, self)
		}
	}
	if flags := loopbackFlags(t, r.ns[0]); flags&unix.IFF_UP == 0 {
		t.Errorf("the loopback is down: flags %#x", flags)
	}

	template, err := readyTemplate()
	if err != nil {
		t.Fatal(err)
	}
	for _, dest := range allReadyDests() {
		rm := r.mount(dest)
		if rm == nil {
			t.Fatalf("no %s mount", dest)
		}
		var fs unix.Statfs_t
		if err := unix.Fstatfs(int(rm.fd.Fd()), &fs); err != nil {
			t.Fatal(err)
		}
		want := findMount(template.Mounts, dest)
		const mqueueMagic = 0x19800202
		magic := map[string]int64{"tmpfs": unix.TMPFS_MAGIC, "devpts": unix.DEVPTS_SUPER_MAGIC,
			"mqueue": mqueueMagic, "sysfs": unix.SYSFS_MAGIC}[want.Device]
		if fs.Type != magic {
			t.Errorf("%s: file system %#x, want %s", dest, fs.Type, want.Device)
		}
		if rm.attached {
			t.Errorf("%s is attached before any launch", dest)
		}
	}
	// The sysfs is the set's network namespace's: its loopback alone.
	sysfs, err := os.Open(fmt.Sprintf("/proc/self/fd/%d/class/net", r.mount("/sys").fd.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	ifaces, err := sysfs.Readdirnames(-1)
	sysfs.Close()
	if err != nil || len(ifaces) != 1 || ifaces[0] != "lo" {
		t.Errorf("the set's /sys shows interfaces %v, %v; want lo alone", ifaces, err)
	}
	dev := int(r.mount("/dev").fd.Fd())
	var st unix.Stat_t
	if err := unix.Fstat(int(r.mount("/tmp").fd.Fd()), &st); err != nil || st.Mode&0o7777 != 0o1777 {
		t.Errorf("/tmp: mode %o, %v; want 1777 (mode=1777)", st.Mode&0o7777, err)
	}
	if err := unix.Fstat(dev, &st); err != nil || st.Mode&0o7777 != 0o755 {
		t.Errorf("/dev: mode %o, %v; want 755", st.Mode&0o7777, err)
	}
	for _, sub := range []string{"pts", "shm", "mqueue"} {
		if err := unix.Fstatat(dev, sub, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil || st.Mode != unix.S_IFDIR|0o755 {
			t.Errorf("/dev/%s: mode %o, %v; want a directory 755", sub, st.Mode, err)
		}
	}
	old := unix.Umask(0o077) // a shim's umask cannot narrow the nodes'
	defer unix.Umask(old)
	r2 := newReadySet(t)
	dev = int(r2.mount("/dev").fd.Fd())
	n := 0
	for _, d := range template.Devices {
		if d.Path == "/dev/ptmx" {
			continue
		}
		n++
		name := strings.TrimPrefix(d.Path, "/dev/")
		if err := unix.Fstatat(dev, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			t.Errorf("%s: %v", d.Path, err)
			continue
		}
		want, _ := d.Mkdev()
		if st.Mode != unix.S_IFCHR|uint32(d.FileMode.Perm()) || st.Rdev != want || st.Uid != d.Uid || st.Gid != d.Gid {
			t.Errorf("%s: mode %o rdev %d owner %d:%d; want %o %d %d:%d", d.Path, st.Mode, st.Rdev, st.Uid, st.Gid,
				unix.S_IFCHR|uint32(d.FileMode.Perm()), want, d.Uid, d.Gid)
		}
	}
	if n == 0 || len(r2.devices) != n {
		t.Errorf("%d device nodes made, the template has %d", len(r2.devices), n)
	}
}

// loopbackFlags reads the loopback's flags in the network namespace ns,
// on a thread that ends with the read.
func loopbackFlags(t *testing.T, ns *os.File) uint16 {
	t.Helper()
	type result struct {
		flags uint16
		err   error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends here
		if err := unix.Unshare(unix.CLONE_FS); err != nil {
			ch <- result{err: err}
			return
		}
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- result{err: err}
			return
		}
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			ch <- result{err: err}
			return
		}
		defer unix.Close(fd)
		ifr, _ := unix.NewIfreq("lo")
		err = unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr)
		ch <- result{ifr.Uint16(), err}
	}()
	res := <-ch
	if res.err != nil {
		t.Fatal(res.err)
	}
	return res.flags
}

// plainConfig is the libcontainer config of a container on rootfs.
func plainConfig(t *testing.T, b *Bundle) *configs.Config {
	t.Helper()
	cfg, err := libcontainerConfig(b, t.TempDir(), b.Rootfs)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func configJSON(t *testing.T, cfg *configs.Config) string {
	t.Helper()
	data, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestReadySetRefused (issue 35): a container the set was not made for
// gets nothing of it, its config untouched, and the set stays whole for
// the next: one with a user namespace, and (for the namespaces) one that
// joins a network namespace; and the mounts are never attached in a
// mount namespace shared with the shim's parent (the host's).
func TestReadySetRefused(t *testing.T) {
	r := newReadySet(t)
	rootfs := t.TempDir()
	userns := &Bundle{ID: "refused", Args: []string{"true"}, CgroupPath: "/brim-test-refused", Rootfs: rootfs,
		UserNS: &subid.Range{HostUID: 100000, HostGID: 100000, Size: 65536}}
	cfg := plainConfig(t, userns)
	before := configJSON(t, cfg)
	if err := r.apply(cfg, rootfs); !errors.Is(err, errNotReady) {
		t.Errorf("a user namespace's container: %v, want errNotReady", err)
	}
	if configJSON(t, cfg) != before {
		t.Error("the refused config changed")
	}
	if r.used || r.held() != len(readyKinds)+len(allReadyDests()) {
		t.Errorf("the set was spent on a refused container: used %v, holds %d", r.used, r.held())
	}

	joins := &Bundle{ID: "joins", Args: []string{"true"}, CgroupPath: "/brim-test-joins", Rootfs: rootfs,
		NetNSPath: "/proc/self/ns/net"}
	cfg = plainConfig(t, joins)
	err := r.apply(cfg, rootfs)
	if err == nil || !strings.Contains(err.Error(), "does not make its own net namespace") {
		t.Errorf("a container joining a network namespace: %v", err)
	}
	for _, ns := range cfg.Namespaces {
		if ns.Type != configs.NEWNET && ns.Path != "" {
			t.Errorf("%s namespace given (%s) to a container that joins a network namespace", ns.Type, ns.Path)
		}
	}
	// This test runs in the mount namespace it was started in: the
	// mounts must stay unattached, and the config's mounts with them.
	if err == nil || !strings.Contains(err.Error(), "mount namespace") {
		t.Errorf("mounts in the parent's mount namespace: %v", err)
	}
	for _, dest := range allReadyDests() {
		if findMount(cfg.Mounts, dest) == nil {
			t.Errorf("%s taken out of the config without being attached", dest)
		}
		if r.mount(dest).attached {
			t.Errorf("%s attached", dest)
		}
	}
}

// TestReadySetApplyNamespaces (issue 35): a plain container's config
// names the set's namespaces by the shim's /proc entry, and plans no
// loopback set-up.
func TestReadySetApplyNamespaces(t *testing.T) {
	r := newReadySet(t)
	rootfs := t.TempDir()
	cfg := plainConfig(t, &Bundle{ID: "plain", Args: []string{"true"}, CgroupPath: "/brim-test-plain", Rootfs: rootfs})
	if err := r.applyNamespaces(cfg); err != nil {
		t.Fatal(err)
	}
	for i, k := range readyKinds {
		want := fmt.Sprintf("/proc/%d/fd/%d", os.Getpid(), r.ns[i].Fd())
		if got := cfg.Namespaces.PathOf(k.typ); got != want {
			t.Errorf("%s namespace path %q, want %q", k.name, got, want)
		}
	}
	for _, typ := range []configs.NamespaceType{configs.NEWNS, configs.NEWPID} {
		if !cfg.Namespaces.IsPrivate(typ) {
			t.Errorf("%s namespace no longer new", typ)
		}
	}
	if len(cfg.Networks) != 0 {
		t.Errorf("networks %v: the loopback is up already", cfg.Networks)
	}
	if !r.used {
		t.Error("an applied set is not marked used")
	}
	r.release()
	if r.held() != 0 {
		t.Errorf("released set holds %d descriptors", r.held())
	}
}
