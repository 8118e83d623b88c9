package containerizer

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/moby/sys/mountinfo"
	"github.com/opencontainers/runc/libcontainer"
	"github.com/opencontainers/runc/libcontainer/configs"

	"github.com/brimnode/brim/internal/testutil"
	"github.com/brimnode/brim/isolator"
)

// readyProbe prints, beside probeScript, what a warm shim makes ahead
// for a container (executor's readySet) could get wrong: the /dev nodes
// and mount points (type, mode, owner, numbers), /tmp's, the network
// namespace (its interfaces, the loopback's state), the IPC namespace
// (its queues and segments), the UTS namespace (hostname is in
// probeScript, the domain name here).
const readyProbe = `
echo dev:; for f in /dev/* /dev/pts/* /dev/mqueue /tmp; do stat -c '%n %F %a %u %g %t %T' $f; done
echo tmp: $(ls -a /tmp | tr '\n' ' ')
echo net: $(ls /sys/class/net | tr '\n' ' ')
echo lo: $(cat /sys/class/net/lo/operstate /sys/class/net/lo/flags)
echo addr: $(cat /proc/net/if_inet6 2>/dev/null | awk '{print $1, $6}' | tr '\n' ' ')
echo domainname: $(cat /proc/sys/kernel/domainname)
echo mqueue: $(ls -a /dev/mqueue | tr '\n' ' ')
echo sysvipc: $(cat /proc/sysvipc/shm /proc/sysvipc/sem /proc/sysvipc/msg | wc -l)
`

// sortMounts sorts the lines of probeScript's "mounts:" section: a
// prepared container's readyMounts come with its root, before the
// mounts libcontainer makes, so they are listed first.
func sortMounts(out string) string {
	lines := strings.Split(out, "\n")
	start := slices.Index(lines, "mounts:")
	if start < 0 {
		return out
	}
	end := start + 1
	for end < len(lines) && strings.HasPrefix(lines[end], " ") {
		end++
	}
	slices.Sort(lines[start+1 : end])
	return strings.Join(lines, "\n")
}

// launchConfig reads the libcontainer config container id runs with
// (its state.json, while it runs).
func launchConfig(t *testing.T, c *Containerizer, id string) *libcontainer.State {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(c.runcRoot, id, "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	var st libcontainer.State
	if err := json.Unmarshal(data, &st); err != nil {
		t.Fatal(err)
	}
	return &st
}

// TestPreparedLaunchIsUnprepared (issue 35): a container whose warm shim
// made its network, IPC and UTS namespaces and its /dev, /dev/pts,
// /dev/shm, /dev/mqueue, /tmp and /sys mounts ahead reads, field by field, what a
// container libcontainer made entirely reads (probeScript and
// readyProbe: mounts with their options and sources, device nodes,
// loopback, hostname, domain name, IPC objects, user, capabilities,
// seccomp, cgroups, masks, ...), on the host root and on a rootfs; its
// config shows it got them (so the comparison is not between two
// unprepared launches); and the shim keeps no copy of the mounts once
// the container runs.
func TestPreparedLaunchIsUnprepared(t *testing.T) {
	for _, tc := range []struct {
		name   string
		rootfs bool
		user   string
	}{{"host-root", false, ""}, {"host-root-nobody", false, "nobody"}, {"rootfs", true, ""}} {
		t.Run(tc.name, func(t *testing.T) {
			rootfs := ""
			if tc.rootfs {
				rootfs = busyboxRootfs(t)
				for _, app := range []string{"grep", "id", "awk", "head", "wc", "tr", "hostname", "pwd", "env", "sort", "stat", "mkdir"} {
					if err := os.Symlink("busybox", filepath.Join(rootfs, "bin", app)); err != nil {
						t.Fatal(err)
					}
				}
			}
			var outs []string
			for _, noPrepare := range []bool{true, false} {
				e := newPoolEnv(t, "", Config{WarmSandboxes: -1, NoShimPrepare: noPrepare})
				spec := func(cmd ...string) Spec {
					return Spec{ID: testutil.UniqueName("prep"), Command: cmd, Rootfs: rootfs, User: tc.user,
						Cwd: "/tmp", Env: []string{"A=1"}, Limits: isolator.Limits{MilliCPUs: 250, MemoryBytes: 96 << 20}}
				}
				// A sleeper first, to read its config and the shim's
				// mounts while it runs.
				sleeper, _ := e.launch(spec("sleep", "1000"))
				st := launchConfig(t, e.c, sleeper.ID)
				netns := st.Config.Namespaces.PathOf(configs.NEWNET)
				var theirs []string // made by libcontainer
				for _, m := range st.Config.Mounts {
					if slices.Contains(readyMounts, m.Destination) {
						theirs = append(theirs, m.Destination)
					}
				}
				if noPrepare && (netns != "" || len(theirs) != len(readyMounts)) ||
					!noPrepare && (netns == "" || len(theirs) > 0) {
					t.Fatalf("NoShimPrepare %v: the launch's network namespace %q, mounts libcontainer made %v", noPrepare, netns, theirs)
				}
				if mounts := shimMountsUnder(t, st.InitProcessPid, sleeper.ShimPid); len(mounts) > 0 {
					t.Errorf("the shim keeps mounts of the container: %q", mounts)
				}
				if err := e.c.Destroy(context.Background(), sleeper.ID); err != nil {
					t.Fatal(err)
				}

				info, _ := e.launch(spec("sh", "-c", probeScript+readyProbe))
				if st := e.wait(info.ID); st.Code != 0 {
					t.Fatalf("probe: %+v: %s", st, readSandbox(t, info, "stderr"))
				}
				out := normalise(readSandbox(t, info, "stdout"), info.ID)
				// Each containerizer has its own cgroup parent and state.
				out = strings.ReplaceAll(strings.ReplaceAll(out, e.parent, "<parent>"), e.stateDir, "<state>")
				outs = append(outs, sortMounts(out))
				if err := e.c.Destroy(context.Background(), info.ID); err != nil {
					t.Fatal(err)
				}
			}
			if outs[0] != outs[1] {
				t.Errorf("the prepared container differs from the unprepared one:\n%s", lineDiff(outs[0], outs[1]))
			}
			for _, want := range []string{"/dev/null character special file 666 0 0 1 3", "lo: unknown 0x9", "/tmp directory 1777 0 0", "/dev/pts/ptmx character special file"} {
				if !strings.Contains(outs[0], want) {
					t.Errorf("the probe does not show %q:\n%s", want, outs[0])
				}
			}
		})
	}
}

// readyMounts are the mounts a warm shim makes ahead.
var readyMounts = []string{"/dev", "/dev/pts", "/dev/shm", "/dev/mqueue", "/tmp", "/sys"}

// shimMountsUnder lists the mounts in shim's mount namespace of the file
// systems mounted on readyMounts in the container whose init is pid.
func shimMountsUnder(t *testing.T, pid, shim int) []string {
	t.Helper()
	// On the host root the container's root holds the host's /dev,
	// /dev/pts and /dev/shm, covered: the last mount listed on a mount
	// point is the one on top.
	top := map[string][2]int{} // mount point -> super block (major, minor)
	for _, m := range mountsOf(t, pid) {
		if slices.Contains(readyMounts, m.Mountpoint) {
			top[m.Mountpoint] = [2]int{m.Major, m.Minor}
		}
	}
	theirs := map[[2]int]string{} // super block -> mount point
	for mp, sb := range top {
		theirs[sb] = mp
	}
	if len(theirs) != len(readyMounts) {
		t.Fatalf("the container's %v: %v", readyMounts, theirs)
	}
	var out []string
	for _, m := range mountsOf(t, shim) {
		if mp, ok := theirs[[2]int{m.Major, m.Minor}]; ok {
			out = append(out, m.Mountpoint+" (the container's "+mp+")")
		}
	}
	return out
}

// mountsOf reads /proc/<pid>/mountinfo, in its order.
func mountsOf(t *testing.T, pid int) []*mountinfo.Info {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/mountinfo", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ms, err := mountinfo.GetMountsFromReader(f, nil)
	if err != nil {
		t.Fatal(err)
	}
	return ms
}
