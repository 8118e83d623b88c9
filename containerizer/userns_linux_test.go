package containerizer

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/brimnode/brim/internal/subid"
	"github.com/brimnode/brim/internal/testutil"
	"github.com/brimnode/brim/isolator"
)

// testRange is far above any real user on the host.
var testRange = subid.Range{HostUID: 3_000_000_000, HostGID: 3_000_100_000, Size: 65536}

// usernsBase is a directory outside /tmp (the container has its own),
// traversable like /var/lib, holding a root-only 0600 file.
func usernsBase(t *testing.T) (base, secret string) {
	t.Helper()
	base, err := os.MkdirTemp("/var/tmp", "brim-test-userns-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	secret = filepath.Join(base, "root-only")
	if err := os.WriteFile(secret, []byte("host secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return base, secret
}

// TestUserNSRootIsUnprivileged (issue 13): a task in a user namespace
// that runs as root inside it is host uid HostUID (its /proc status on
// the host, its uid_map), cannot read a root-only 0600 file of the host
// root (bind-mounted read-only), sees host root's files as the overflow
// user, and writes its sandbox, whose files belong to the range on the
// host.
func TestUserNSRootIsUnprivileged(t *testing.T) {
	base, secret := usernsBase(t)
	e := newEnv(t, filepath.Join(base, "state"))
	script := strings.Join([]string{
		`echo uid=$(id -u) gid=$(id -g)`,
		`echo uid_map $(cat /proc/self/uid_map)`,
		`echo gid_map $(cat /proc/self/gid_map)`,
		`cat ` + secret + ` >/dev/null 2>&1 && echo secret=read || echo secret=denied`,
		`echo secret_owner=$(stat -c %u ` + secret + `)`,
		`echo from-task > /mnt/sandbox/mine && echo sandbox=written`,
		`echo done`,
		`exec sleep 1000`,
	}, "\n")
	for _, tc := range []struct {
		user     string
		uid, gid uint32
	}{
		{"", 0, 0},
		{"nobody", 65534, 65534},
	} {
		t.Run("user="+tc.user, func(t *testing.T) {
			r := testRange
			info := e.launch(Spec{User: tc.user, UserNS: &r, Command: []string{"sh", "-c", script}, Limits: isolator.Limits{MilliCPUs: 100}})
			defer func() {
				_ = e.c.Kill(context.Background(), info.ID, -1)
				e.wait(info.ID)
			}()
			out := waitOutput(t, info, "done\n")
			hostUID, hostGID := r.Host(tc.uid, tc.gid)
			want := []string{
				fmt.Sprintf("uid=%d gid=%d", tc.uid, tc.gid),
				fmt.Sprintf("uid_map 0 %d %d", r.HostUID, r.Size),
				fmt.Sprintf("gid_map 0 %d %d", r.HostGID, r.Size),
				"secret=denied",
				"secret_owner=65534", // host root is not mapped: the overflow uid
				"sandbox=written",
			}
			for _, w := range want {
				if !strings.Contains(out, w+"\n") {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", info.Pid))
			if err != nil {
				t.Fatal(err)
			}
			wantUID := fmt.Sprintf("Uid:\t%d\t%d\t%d\t%d\n", hostUID, hostUID, hostUID, hostUID)
			wantGID := fmt.Sprintf("Gid:\t%d\t%d\t%d\t%d\n", hostGID, hostGID, hostGID, hostGID)
			if !strings.Contains(string(status), wantUID) || !strings.Contains(string(status), wantGID) {
				t.Errorf("host /proc/%d/status: want %q and %q:\n%s", info.Pid, wantUID, wantGID, status)
			}
			for _, p := range []string{info.SandboxDir, filepath.Join(info.SandboxDir, "mine")} {
				var st syscall.Stat_t
				if err := syscall.Stat(p, &st); err != nil {
					t.Fatal(err)
				}
				if st.Uid != hostUID || st.Gid != hostGID {
					t.Errorf("%s owned by %d:%d on the host, want %d:%d", p, st.Uid, st.Gid, hostUID, hostGID)
				}
			}
			// The agent (root) reads the task's output.
			if !strings.HasPrefix(readSandbox(t, info, "stdout"), "uid=") {
				t.Error("stdout not readable by root on the host")
			}
		})
	}
}

// waitOutput waits for the container's stdout to contain marker.
func waitOutput(t *testing.T, info *Info, marker string) string {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		out := readSandbox(t, info, "stdout")
		if strings.Contains(out, marker) {
			return out
		}
		if time.Now().After(deadline) {
			errOut := readSandbox(t, info, "stderr")
			t.Fatalf("no %q in stdout within a minute:\n%s\nstderr:\n%s", marker, out, errOut)
		}
	}
}

// TestUserNSRangeTooSmall: a user outside the range fails the launch
// before anything is created.
func TestUserNSRangeTooSmall(t *testing.T) {
	base, _ := usernsBase(t)
	e := newEnv(t, filepath.Join(base, "state"))
	r := subid.Range{HostUID: testRange.HostUID, HostGID: testRange.HostGID, Size: 1000}
	_, err := e.c.Launch(context.Background(), Spec{ID: testutil.UniqueName("ct"), User: "nobody", UserNS: &r,
		Command: []string{"true"}, Limits: isolator.Limits{MilliCPUs: 100}})
	if !errors.Is(err, ErrUserNS) || !strings.Contains(err.Error(), "65534") {
		t.Fatalf("launch as nobody in a range of 1000: %v, want ErrUserNS naming the user", err)
	}
	if ents, _ := os.ReadDir(filepath.Join(e.stateDir, "containers")); len(ents) != 0 {
		t.Errorf("left behind: %v", ents)
	}
}

// TestUserNSUnreachableStateDir: a state dir below a directory the
// namespace's root cannot traverse fails the launch with an error naming
// it, and leaves nothing behind.
func TestUserNSUnreachableStateDir(t *testing.T) {
	base, _ := usernsBase(t)
	closed := filepath.Join(base, "closed")
	if err := os.Mkdir(closed, 0o700); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, filepath.Join(closed, "state"))
	r := testRange
	_, err := e.c.Launch(context.Background(), Spec{ID: testutil.UniqueName("ct"), UserNS: &r,
		Command: []string{"true"}, Limits: isolator.Limits{MilliCPUs: 100}})
	if !errors.Is(err, ErrUserNS) || !strings.Contains(err.Error(), closed) {
		t.Fatalf("launch: %v, want ErrUserNS naming %s", err, closed)
	}
	if ents, _ := os.ReadDir(filepath.Join(e.stateDir, "containers")); len(ents) != 0 {
		t.Errorf("left behind: %v", ents)
	}
}

// TestUserNSRootfs: a task in a user namespace on an operator's rootfs
// that has no /mnt (the sandbox's mount point) starts, writes its sandbox
// and runs as the range; runc's init inside the namespace could not
// create the mount point in the host-owned rootfs, so the shim does.
func TestUserNSRootfs(t *testing.T) {
	base, _ := usernsBase(t)
	e := newEnv(t, filepath.Join(base, "state"))
	rootfs := busyboxRootfs(t)
	// t.TempDir's two levels are 0700: the namespace's root must reach it.
	for _, d := range []string{filepath.Dir(rootfs), filepath.Dir(filepath.Dir(rootfs))} {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(filepath.Join(rootfs, "mnt")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the rootfs has /mnt already (%v): the test needs one without", err)
	}
	r := testRange
	info := e.launch(Spec{Rootfs: rootfs, UserNS: &r, Command: []string{"sh", "-c", `echo hi > /mnt/sandbox/mine && echo uid $(id -u)`},
		Limits: isolator.Limits{MilliCPUs: 100}})
	if st := e.wait(info.ID); st.Code != 0 {
		t.Fatalf("exit %+v; stderr: %s", st, readSandbox(t, info, "stderr"))
	}
	if out := readSandbox(t, info, "stdout"); out != "uid 0\n" {
		t.Errorf("stdout %q, want uid 0", out)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(info.SandboxDir, "mine"), &st); err != nil {
		t.Fatal(err)
	}
	if st.Uid != r.HostUID || st.Gid != r.HostGID {
		t.Errorf("the task's file is %d:%d on the host, want %d:%d", st.Uid, st.Gid, r.HostUID, r.HostGID)
	}
}
