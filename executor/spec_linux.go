package executor

import (
	"fmt"
	"path/filepath"

	// Registers the cgroup device-rule managers; without it every start
	// fails with "cgroup manager is not configured to set device rules".
	_ "github.com/opencontainers/cgroups/devices"
	"github.com/opencontainers/runc/libcontainer/configs"
	"github.com/opencontainers/runc/libcontainer/specconv"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// RuntimeSpec builds the OCI runtime spec the shim runs for bundle b in
// container directory dir: runc's defaults (`runc spec`: capabilities
// AUDIT_WRITE, KILL, NET_BIND_SERVICE; masked and read-only /proc and /sys
// paths; no_new_privileges; device rules), a read-only root, a private
// /tmp, the sandbox (the data dir's sandbox) at /mnt/sandbox, the process user
// (b.UID, b.GID, no supplementary groups), the cgroup path, the
// network namespace, a user namespace with b.UserNS's mappings when set,
// the oom_score_adj and, unless b.NoSeccomp, brim's seccomp profile. An
// image root is read-only too unless b.Image.ReadWrite.
// rootfs is the directory libcontainer pivots into. Cgroup limits are not
// in it: the isolators own them. Any OCI runtime can run the result
// (bench/10-launch.bench.sh gives it to runc as the equivalent bundle).
func RuntimeSpec(b *Bundle, dir, rootfs string) *specs.Spec {
	spec := specconv.Example()
	spec.Root = &specs.Root{Path: rootfs, Readonly: b.Image == nil || !b.Image.ReadWrite}
	spec.Hostname = b.Hostname
	if spec.Hostname == "" {
		spec.Hostname = b.ID
	}
	p := spec.Process
	p.Terminal = b.Tty
	p.Args = b.Args
	p.Env = withPath(b.Env)
	p.Cwd = b.Cwd
	if p.Cwd == "" {
		p.Cwd = "/"
	}
	p.Rlimits = nil // inherit the shim's
	p.OOMScoreAdj = b.OOMScoreAdj
	// No supplementary groups: libcontainer sets them to exactly this list.
	p.User = specs.User{UID: b.UID, GID: b.GID}

	spec.Mounts = append(spec.Mounts,
		specs.Mount{
			Destination: "/tmp", Type: "tmpfs", Source: "tmpfs",
			Options: []string{"nosuid", "nodev", "mode=1777"},
		},
		specs.Mount{
			Destination: SandboxMountPoint, Type: "bind",
			Source:  filepath.Join(b.Data(dir), SandboxDir),
			Options: []string{"rbind", "rw", "nosuid", "nodev"},
		},
	)
	l := spec.Linux
	l.CgroupsPath = b.CgroupPath
	l.MaskedPaths = append(l.MaskedPaths, "/sys/devices/virtual/powercap")
	for i := range l.Namespaces {
		if l.Namespaces[i].Type == specs.NetworkNamespace {
			l.Namespaces[i].Path = b.NetNSPath
		}
	}
	if r := b.UserNS; r != nil {
		// Created first by runc, so that the container's other namespaces
		// (and the mounts of /proc, /sys, /dev in them) belong to it.
		l.Namespaces = append(l.Namespaces, specs.LinuxNamespace{Type: specs.UserNamespace})
		l.UIDMappings = []specs.LinuxIDMapping{{ContainerID: 0, HostID: r.HostUID, Size: r.Size}}
		l.GIDMappings = []specs.LinuxIDMapping{{ContainerID: 0, HostID: r.HostGID, Size: r.Size}}
		if b.NetNSPath != "" {
			// A joined network namespace belongs to the host's user
			// namespace: the kernel refuses the container's root a new
			// sysfs there (EPERM). The host's /sys, which runc binds for
			// rootless containers, would show the host's interfaces
			// (/sys/class/net: its NICs' addresses, every container's
			// veth). The shim mounts the namespace's own sysfs, as host
			// root, in its private mount namespace (mountNetSysfs); the
			// container gets that, read-only.
			for i, m := range spec.Mounts {
				if m.Destination == "/sys" {
					spec.Mounts[i] = specs.Mount{Destination: "/sys", Type: "bind", Source: filepath.Join(dir, SysfsDir),
						Options: []string{"rbind", "nosuid", "noexec", "nodev", "ro"}}
				}
			}
		}
	}
	if !b.NoSeccomp {
		l.Seccomp = defaultSeccomp()
	}
	return spec
}

// libcontainerConfig converts the bundle's spec for libcontainer. Its
// cgroup config carries only the device rules: the isolators own every
// other cgroup setting; the init joins the groups (the shim moves it on v1,
// libcontainer on v2: see join_linux.go).
func libcontainerConfig(b *Bundle, dir, rootfs string) (*configs.Config, error) {
	spec := RuntimeSpec(b, dir, rootfs)
	if joinLate() {
		// The container's own groups, assembled by the shim
		// (mountCgroupView), in place of runc's cgroup mount.
		for i, m := range spec.Mounts {
			if m.Type == "cgroup" {
				spec.Mounts[i] = specs.Mount{Destination: m.Destination, Type: "bind", Source: filepath.Join(dir, CgroupViewDir),
					Options: []string{"rbind", "nosuid", "noexec", "nodev", "relatime", "ro"}}
			}
		}
	}
	cfg, err := specconv.CreateLibcontainerConfig(&specconv.CreateOpts{
		CgroupName: b.RuntimeID(),
		Spec:       spec,
	})
	if err != nil {
		return nil, fmt.Errorf("convert spec: %w", err)
	}
	if cfg.Cgroups == nil || cfg.Cgroups.Path != b.CgroupPath || !filepath.IsAbs(cfg.Cgroups.Path) {
		return nil, fmt.Errorf("cgroup path %q not honoured", b.CgroupPath)
	}
	cfg.Cgroups.SkipDevices = false
	return cfg, nil
}
