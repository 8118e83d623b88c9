package executor

import (
	"errors"
	"slices"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/brimnode/brim/internal/subid"
)

func TestIsCommandNotFound(t *testing.T) {
	for msg, want := range map[string]bool{
		`unable to start container process: exec: "nope": executable file not found in $PATH`:      true,
		`unable to start container process: exec: "/nope": stat /nope: no such file or directory`:  true,
		`unable to start container process: error during container init: mount: permission denied`: false,
	} {
		if got := isCommandNotFound(errors.New(msg)); got != want {
			t.Errorf("isCommandNotFound(%q) = %v", msg, got)
		}
	}
}

func TestCheckCgroupFile(t *testing.T) {
	hybrid := "12:name=systemd:/brim/c1\n9:pids:/brim/c1\n5:devices:/brim/c1\n4:memory:/brim/c1\n2:cpuacct:/brim/c1\n1:cpu:/brim/c1\n0::/brim/c1\n"
	all := []string{"name=systemd", "pids", "devices", "memory", "cpuacct", "cpu", ""}
	coMounted := "4:memory:/brim/c1\n2:cpu,cpuacct:/brim/c1\n"
	for _, tc := range []struct {
		name, file  string
		hierarchies []string
		wantErr     bool
	}{
		{"v1 hybrid, all in place", hybrid, all, false},
		{"v1 cpu,cpuacct co-mounted", coMounted, []string{"memory", "cpu", "cpuacct"}, false},
		{"v1 memory elsewhere", strings.Replace(hybrid, "memory:/brim/c1", "memory:/process_api/x", 1), all, true},
		{"v1 devices elsewhere", strings.Replace(hybrid, "devices:/brim/c1", "devices:/", 1), all, true},
		{"v1 cpu elsewhere, co-mounted", "4:memory:/brim/c1\n2:cpu,cpuacct:/\n", []string{"memory", "cpu", "cpuacct"}, true},
		{"v1 prefix is not a match", strings.ReplaceAll(hybrid, "/brim/c1", "/brim/c10"), all, true},
		{"v1 a joined hierarchy missing", strings.Replace(hybrid, "5:devices:/brim/c1\n", "", 1), all, true},
		{"hybrid unified tree elsewhere", strings.Replace(hybrid, "0::/brim/c1", "0::/", 1), all, true},
		{"a v1 line with no controllers is not the unified tree", "3::/brim/c1\n", []string{""}, true},
		{"v2 in place", "0::/brim/c1\n", nil, false},
		{"v2 elsewhere", "0::/brim\n", nil, true},
		{"v2 empty file", "", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hs := tc.hierarchies
			if hs == nil {
				hs = []string{""}
			}
			err := checkCgroupFile(strings.NewReader(tc.file), "/brim/c1", hs, 42)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if err != nil && !errors.Is(err, ErrNotConfined) {
				t.Fatalf("err = %v, want ErrNotConfined", err)
			}
		})
	}
}

// TestRuntimeSpecUser: the bundle's uid and gid reach the OCI spec with no
// supplementary groups (libcontainer sets exactly that list), and a
// bundle without them runs as root, as bundles written before them did.
func TestRuntimeSpecUser(t *testing.T) {
	b := &Bundle{Version: BundleVersion, ID: "u", Args: []string{"true"}, CgroupPath: "/brim/u", StateRoot: "/run/x", UID: 65534, GID: 65533}
	u := RuntimeSpec(b, "/d", "/d/rootfs").Process.User
	if u.UID != 65534 || u.GID != 65533 || len(u.AdditionalGids) != 0 {
		t.Errorf("process user = %+v, want 65534:65533 and no supplementary groups", u)
	}
	b.UID, b.GID = 0, 0
	if u := RuntimeSpec(b, "/d", "/d/rootfs").Process.User; u.UID != 0 || u.GID != 0 {
		t.Errorf("process user of a bundle without uid = %+v, want root", u)
	}
}

// TestRuntimeSpecUserNS: a bundle's range becomes a user namespace with
// one mapping each for uids and gids; with a joined netns /sys is bound
// read-only from the sysfs the shim mounts in that netns (dir/sysfs),
// never the host's; without UserNS the spec has neither.
func TestRuntimeSpecUserNS(t *testing.T) {
	r := subid.Range{HostUID: 100000, HostGID: 200000, Size: 65536}
	hasUserNS := func(s *specs.Spec) bool {
		for _, ns := range s.Linux.Namespaces {
			if ns.Type == specs.UserNamespace {
				return true
			}
		}
		return false
	}
	sysOf := func(s *specs.Spec) specs.Mount {
		for _, m := range s.Mounts {
			if m.Destination == "/sys" {
				return m
			}
		}
		t.Fatal("no /sys mount")
		return specs.Mount{}
	}
	b := &Bundle{ID: "c", Args: []string{"sh"}, CgroupPath: "/brim/c"}
	if s := RuntimeSpec(b, "/d", "/d/rootfs"); hasUserNS(s) || s.Linux.UIDMappings != nil || sysOf(s).Type != "sysfs" {
		t.Errorf("no UserNS: namespaces %v, uid mappings %v, /sys %+v", s.Linux.Namespaces, s.Linux.UIDMappings, sysOf(s))
	}
	b.UserNS = &r
	s := RuntimeSpec(b, "/d", "/d/rootfs")
	if !hasUserNS(s) {
		t.Errorf("no user namespace in %v", s.Linux.Namespaces)
	}
	wantU := []specs.LinuxIDMapping{{ContainerID: 0, HostID: 100000, Size: 65536}}
	wantG := []specs.LinuxIDMapping{{ContainerID: 0, HostID: 200000, Size: 65536}}
	if !slices.Equal(s.Linux.UIDMappings, wantU) || !slices.Equal(s.Linux.GIDMappings, wantG) {
		t.Errorf("mappings %v %v, want %v %v", s.Linux.UIDMappings, s.Linux.GIDMappings, wantU, wantG)
	}
	if m := sysOf(s); m.Type != "sysfs" {
		t.Errorf("own netns: /sys %+v, want a new sysfs", m)
	}
	b.NetNSPath = "/run/netns/x"
	m := sysOf(RuntimeSpec(b, "/d", "/d/rootfs"))
	if m.Type != "bind" || m.Source != "/d/"+SysfsDir || !slices.Contains(m.Options, "ro") {
		t.Errorf("joined netns: /sys %+v, want /d/%s bound read-only", m, SysfsDir)
	}
}

func TestParseSession(t *testing.T) {
	for _, tc := range []struct {
		stat string
		sid  int
		ok   bool
	}{
		{"4242 (sh) S 4200 4242 4242 34816 4242 4194560 …", 4242, true},
		{"77 (a) b (c) R 1 70 71 0 -1", 71, true}, // comm with spaces and ')'
		{"99 (sleep) Z 1 98 98 0", 0, false},      // a zombie is dead already
		{"99 (sleep) S 1", 0, false},
		{"99 sleep S 1 2 3", 0, false},
		{"99 (sleep) S 1 2 x", 0, false},
	} {
		sid, ok := parseSession(tc.stat)
		if sid != tc.sid || ok != tc.ok {
			t.Errorf("parseSession(%q) = %d, %v; want %d, %v", tc.stat, sid, ok, tc.sid, tc.ok)
		}
	}
}
