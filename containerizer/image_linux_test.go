package containerizer

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/brimnode/brim/image"
	"github.com/brimnode/brim/internal/testregistry"
	"github.com/brimnode/brim/internal/testutil"
	"github.com/brimnode/brim/isolator"
)

// imageEnv is an env whose containerizer has an image store under its
// state dir, holding the busybox image with two layers above it: the
// middle one adds /etc/motd, /srv/data and a setuid-root copy of busybox;
// the top one deletes /srv/data (a whiteout) and changes /etc/motd.
type imageEnv struct {
	*env
	store *image.Store
	img   image.Image
}

func newImageEnv(t *testing.T, stateDir string) *imageEnv {
	t.Helper()
	e := newEnv(t, stateDir)
	s, err := image.Open(image.Options{Root: filepath.Join(e.stateDir, "images")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	bb, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Fatal(err)
	}
	mid := testregistry.Layer(t, testregistry.TarEntries(t,
		testregistry.Entry{Name: "etc/"}, testregistry.Entry{Name: "etc/motd", Body: []byte("middle\n")},
		testregistry.Entry{Name: "srv/"}, testregistry.Entry{Name: "srv/data", Body: []byte("data\n")},
		testregistry.Entry{Name: "bin/"}, testregistry.Entry{Name: "bin/suid/"}, testregistry.Entry{Name: "bin/suid/busybox", Body: bb, Mode: 0o4755}))
	top := testregistry.Layer(t, testregistry.TarEntries(t,
		testregistry.Entry{Name: "etc/"}, testregistry.Entry{Name: "etc/motd", Body: []byte("top\n")},
		testregistry.Entry{Name: "srv/"}, testregistry.Entry{Name: "srv/.wh.data"}))
	src := testregistry.WriteLayout(t, testregistry.BusyboxImage(t, v1.Config{Cmd: []string{"sh"}}, mid, top))
	img, err := s.Pull(context.Background(), src, image.PullOptions{Name: "busybox:test"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(Config{StateDir: e.stateDir, Isolators: []isolator.Isolator{e.iso}, ShimBinary: e.shim, Images: s})
	if err != nil {
		t.Fatal(err)
	}
	e.all = append(e.all, c)
	e.c = c
	return &imageEnv{env: e, store: s, img: img}
}

// assertNoSnapshots checks the store holds no snapshot and no upper dir.
func (e *imageEnv) assertNoSnapshots() {
	e.t.Helper()
	if snaps := e.store.Snapshots(); len(snaps) != 0 {
		e.t.Errorf("snapshots left: %+v", snaps)
	}
	if ents, _ := os.ReadDir(filepath.Join(e.stateDir, "images", "snapshots")); len(ents) != 0 {
		e.t.Errorf("snapshot directories left: %v", ents)
	}
}

// A container runs on the image's layers stacked (top copy wins, a
// whiteout hides), as the user given, read-only unless asked, with its
// sandbox and /tmp writable; Destroy releases its snapshot.
func TestImageLaunch(t *testing.T) {
	e := newImageEnv(t, "")
	script := strings.Join([]string{
		`cat /etc/motd`,
		`test -e /srv/data && echo data=visible || echo data=hidden`,
		`echo uid=$(id -u) gid=$(id -g)`,
		`touch /newfile 2>/dev/null && echo root=writable || echo root=read-only`,
		`echo x > /tmp/t && echo tmp=writable`,
		`echo x > /mnt/sandbox/s && echo sandbox=writable`,
		`pwd`,
	}, "; ")
	for _, tc := range []struct {
		rw   bool
		want []string
	}{
		{false, []string{"top", "data=hidden", "uid=1000 gid=1000", "root=read-only", "tmp=writable", "sandbox=writable", "/srv"}},
		{true, []string{"top", "data=hidden", "uid=1000 gid=1000", "root=read-only", "tmp=writable", "sandbox=writable", "/srv"}},
	} {
		info := e.launch(Spec{Image: e.img.ID, ReadWrite: tc.rw, User: "1000:1000", Cwd: "/srv",
			Command: []string{"sh", "-c", script}, Env: e.img.Config.Env, Limits: isolator.Limits{MilliCPUs: 100}})
		if st := e.wait(info.ID); st.Code != 0 {
			t.Fatalf("rw %v: exit %+v; stderr: %s", tc.rw, st, readSandbox(t, info, "stderr"))
		}
		out := readSandbox(t, info, "stdout")
		for _, w := range tc.want {
			if !strings.Contains(out, w+"\n") {
				t.Errorf("rw %v: output lacks %q:\n%s", tc.rw, w, out)
			}
		}
		if len(e.store.Snapshots()) != 1 {
			t.Errorf("rw %v: snapshots %+v while the container exists, want its own", tc.rw, e.store.Snapshots())
		}
		if err := e.c.Destroy(context.Background(), info.ID); err != nil {
			t.Fatal(err)
		}
		e.assertGone(info.ID, info.ShimPid)
		e.assertNoSnapshots()
	}
}

// A read-write root takes the container's writes into its upper dir,
// never into a layer, and root inside the image (the agent allowing it)
// writes where the image's root may.
func TestImageReadWrite(t *testing.T) {
	e := newImageEnv(t, "")
	info := e.launch(Spec{Image: e.img.ID, ReadWrite: true, Command: []string{"sh", "-c",
		`echo mine > /etc/motd && echo new > /newfile && rm /bin/cat && cat /etc/motd; ls /bin/cat 2>/dev/null || echo cat=gone`},
		Env: e.img.Config.Env, Limits: isolator.Limits{MilliCPUs: 100}})
	if st := e.wait(info.ID); st.Code != 0 {
		t.Fatalf("exit %+v; stderr: %s", st, readSandbox(t, info, "stderr"))
	}
	if out := readSandbox(t, info, "stdout"); out != "mine\ncat=gone\n" {
		t.Errorf("output %q, want the container's motd and /bin/cat gone", out)
	}
	b, err := os.ReadFile(filepath.Join(e.stateDir, "images", "snapshots", info.ID, "upper", "etc", "motd"))
	if err != nil || string(b) != "mine\n" {
		t.Errorf("upper dir's etc/motd = %q, %v; want the container's write", b, err)
	}
	for _, l := range e.img.Layers {
		dir := e.store.LayerDir(l.DiffID)
		if _, err := os.Stat(filepath.Join(dir, "newfile")); err == nil {
			t.Errorf("a write reached layer %s", l.DiffID)
		}
	}
	if b, err := os.ReadFile(filepath.Join(e.store.LayerDir(e.img.Layers[2].DiffID), "etc/motd")); err != nil || string(b) != "top\n" {
		t.Errorf("top layer's etc/motd = %q, %v; want it untouched", b, err)
	}
	if err := e.c.Destroy(context.Background(), info.ID); err != nil {
		t.Fatal(err)
	}
	e.assertNoSnapshots()
}

// Every confinement of the host-root mode holds on an image root: no
// new privileges (a setuid-root binary of the image gives nothing),
// seccomp, runc's capabilities only (root too), masked /proc paths, and
// nothing of the host: not the agent's state dir, not /run.
func TestImageConfinement(t *testing.T) {
	e := newImageEnv(t, "")
	script := strings.Join([]string{
		`grep -E '^(NoNewPrivs|Seccomp):' /proc/self/status`,
		`grep '^CapEff:' /proc/self/status`,
		`echo suid=$(/bin/suid/busybox id -u)`,
		`echo keys=$(cat /proc/keys 2>/dev/null | wc -c)`,
		`ls -A /sys/firmware 2>/dev/null | grep -q . && echo firmware=listed || echo firmware=masked`,
		`ls ` + e.stateDir + ` >/dev/null 2>&1 && echo state=visible || echo state=absent`,
		`ls -A /run 2>/dev/null | grep -q . && echo run=listed || echo run=empty`,
		`mount -t tmpfs none /tmp 2>/dev/null && echo mount=allowed || echo mount=denied`,
	}, "; ")
	for _, tc := range []struct {
		user string
		want []string
	}{
		{"1000:1000", []string{"NoNewPrivs:\t1", "Seccomp:\t2", "CapEff:\t0000000000000000", "suid=1000", "keys=0", "firmware=masked", "state=absent", "run=empty", "mount=denied"}},
		// Root (when the agent allows it) keeps runc's three capabilities:
		// AUDIT_WRITE, KILL, NET_BIND_SERVICE.
		{"0:0", []string{"NoNewPrivs:\t1", "Seccomp:\t2", "CapEff:\t0000000020000420", "suid=0", "keys=0", "firmware=masked", "state=absent", "run=empty", "mount=denied"}},
	} {
		info := e.launch(Spec{Image: e.img.ID, User: tc.user, Command: []string{"sh", "-c", script},
			Env: e.img.Config.Env, Limits: isolator.Limits{MilliCPUs: 100}})
		if st := e.wait(info.ID); st.Code != 0 {
			t.Fatalf("user %s: exit %+v; stderr: %s", tc.user, st, readSandbox(t, info, "stderr"))
		}
		out := readSandbox(t, info, "stdout")
		for _, w := range tc.want {
			if !strings.Contains(out, w+"\n") {
				t.Errorf("user %s: output lacks %q:\n%s", tc.user, w, out)
			}
		}
	}
}

// A command the image lacks fails the launch with ErrCommandNotFound and
// leaves nothing: no container, no snapshot; a name instead of UID:GID is
// refused before anything is made.
func TestImageBadLaunchLeavesNothing(t *testing.T) {
	e := newImageEnv(t, "")
	id := testutil.UniqueName("ct")
	_, err := e.c.Launch(context.Background(), Spec{ID: id, Image: e.img.ID, Command: []string{"no-such-command"},
		Env: e.img.Config.Env, Limits: isolator.Limits{MilliCPUs: 100}})
	if !errors.Is(err, ErrCommandNotFound) {
		t.Fatalf("launch of a missing command = %v, want ErrCommandNotFound", err)
	}
	e.assertGone(id, 0)
	e.assertNoSnapshots()
	for _, spec := range []Spec{
		{ID: id, Image: e.img.ID, User: "app", Command: []string{"true"}},
		{ID: id, Image: e.img.ID, Rootfs: "/", Command: []string{"true"}},
		{ID: id, Image: "sha256:" + strings.Repeat("0", 64), Command: []string{"true"}},
	} {
		spec.Limits = isolator.Limits{MilliCPUs: 100}
		if _, err := e.c.Launch(context.Background(), spec); err == nil {
			t.Errorf("launch %+v: no error", spec)
		}
		e.assertGone(id, 0)
		e.assertNoSnapshots()
	}
}

// In a user namespace the layers are mapped, not chowned: the image's
// root files are the namespace root's inside, the layers on disk keep
// their owners, and a file root writes is the range's first host uid.
// The v2 lane runs it on Debian's 6.1 (overlay over id-mapped lower
// layers needs 5.19).
func TestImageUserNamespace(t *testing.T) {
	// On a disk: id-mapped mounts of tmpfs (the v2 lane's /tmp) come only
	// with Linux 6.3; traversable, like /var/lib.
	base := testutil.DiskDir(t)
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	e := newImageEnv(t, filepath.Join(base, "state"))
	r := testRange
	info := e.launch(Spec{Image: e.img.ID, ReadWrite: true, UserNS: &r, Command: []string{"sh", "-c",
		`stat -c 'busybox=%u:%g' /bin/busybox; stat -c 'home=%u:%g' /home/app; stat -c 'root=%u:%g' /; echo x > /written && echo written`},
		Env: e.img.Config.Env, Limits: isolator.Limits{MilliCPUs: 100}})
	if st := e.wait(info.ID); st.Code != 0 {
		t.Fatalf("exit %+v; stderr: %s", st, readSandbox(t, info, "stderr"))
	}
	out := readSandbox(t, info, "stdout")
	for _, w := range []string{"busybox=0:0", "home=1000:1000", "root=0:0", "written"} {
		if !strings.Contains(out, w+"\n") {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(e.store.LayerDir(e.img.Layers[0].DiffID), "bin/busybox"), &st); err != nil || st.Uid != 0 {
		t.Errorf("layer's bin/busybox owned by %d (%v): a layer was chowned", st.Uid, err)
	}
	if err := syscall.Stat(filepath.Join(e.stateDir, "images", "snapshots", info.ID, "upper", "written"), &st); err != nil || st.Uid != r.HostUID || st.Gid != r.HostGID {
		t.Errorf("the container root's file is host %d:%d (%v), want %d:%d", st.Uid, st.Gid, err, r.HostUID, r.HostGID)
	}
	if _, err := os.Stat(filepath.Join(e.stateDir, "containers", info.ID, "layers")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the id-mapped layers' mount points stayed: %v", err)
	}
}

// After an agent restart, a snapshot whose container is gone is released
// by Recover; one whose container is kept stays.
func TestImageRecoverReleasesOrphans(t *testing.T) {
	e := newImageEnv(t, "")
	info := e.launch(Spec{Image: e.img.ID, Command: []string{"sleep", "1000"}, Env: e.img.Config.Env, Limits: isolator.Limits{MilliCPUs: 100}})
	if _, err := e.store.Prepare(context.Background(), "gone-container", e.img); err != nil {
		t.Fatal(err)
	}
	c2, err := New(Config{StateDir: e.stateDir, Isolators: []isolator.Isolator{e.iso}, ShimBinary: e.shim, Images: e.store})
	if err != nil {
		t.Fatal(err)
	}
	e.all = append(e.all, c2)
	e.c = c2
	if _, err := c2.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	snaps := e.store.Snapshots()
	if len(snaps) != 1 || snaps[0].ID != info.ID {
		t.Errorf("snapshots after Recover: %+v, want only %s's", snaps, info.ID)
	}
	if err := c2.Kill(context.Background(), info.ID, -1); err != nil {
		t.Fatal(err)
	}
	if err := c2.Destroy(context.Background(), info.ID); err != nil {
		t.Fatal(err)
	}
	e.assertNoSnapshots()
}

// Where the state dir is xfs with project quotas enforced, a read-write
// root's upper dir is held at its disk limit by the kernel: a write past
// it fails (EDQUOT) and the container goes on, and DiskUsage says the
// limit is enforced. This machine's kernel has no xfs quotas (the test
// skips); the v2 lane's Debian 6.1 has them.
func TestImageDiskQuota(t *testing.T) {
	mnt := testutil.XFSProjectQuota(t)
	e := newImageEnv(t, filepath.Join(mnt, "state"))
	info := e.launch(Spec{Image: e.img.ID, ReadWrite: true, User: "1000:1000", Env: e.img.Config.Env,
		Limits: isolator.Limits{MilliCPUs: 100, DiskBytes: 4 << 20}, Command: []string{"sh", "-c",
			`dd if=/dev/zero of=/home/app/big bs=1M count=16 2>/dev/null && echo wrote=all || echo wrote=stopped; exec sleep 1000`}})
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		if strings.Contains(readSandbox(t, info, "stdout"), "wrote=") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the container never finished writing")
		}
	}
	if out := readSandbox(t, info, "stdout"); !strings.Contains(out, "wrote=stopped\n") {
		t.Errorf("a write past the quota: %q, want it stopped", out)
	}
	used, limit, enforced, err := e.c.DiskUsage(context.Background(), info.ID)
	if err != nil || !enforced || limit != 4<<20 || used > limit || used < 1<<20 {
		t.Errorf("DiskUsage = %d, %d, %v, %v; want enforced, at most the 4 MiB limit", used, limit, enforced, err)
	}
	infos, err := e.c.List(context.Background())
	if err != nil || len(infos) != 1 || infos[0].State != StateRunning {
		t.Errorf("containers %+v, %v: want it running (the quota only stops its write)", infos, err)
	}
}
