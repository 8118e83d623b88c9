package executor

import (
	"encoding/json"

	"github.com/opencontainers/cgroups"
	"github.com/opencontainers/runc/libcontainer"
	"github.com/opencontainers/runc/libcontainer/configs"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// prewarm does, in a warm shim waiting for its container, the work whose
// result the Go runtime and libcontainer keep per process, so that a launch
// does not pay for it:
//   - encoding/json builds a codec per type by reflection on first use and
//     caches it. libcontainer encodes the whole container config for its
//     init and again for state.json, and the shim decodes bundle.json: cold,
//     that is ≈ 0.8 ms idle and 1.5–2.5 ms on a loaded host, on the launch
//     path (perf, bench/10-launch.bench.sh).
//   - the roots of the cgroup v1 hierarchies, found once per process
//     (hierarchyRoots).
//
// It has no side effects outside the process: nothing is written, created
// or joined. Errors are irrelevant (the launch redoes the work and reports
// its own).
func prewarm() {
	cfg := configs.Config{
		Cgroups:      &cgroups.Cgroup{Resources: &cgroups.Resources{}},
		Capabilities: &configs.Capabilities{},
		Seccomp:      &configs.Seccomp{Syscalls: []*configs.Syscall{{Args: []*configs.Arg{{}}}}},
		Mounts:       []*configs.Mount{{}},
		Namespaces:   configs.Namespaces{{}},
		Rlimits:      []configs.Rlimit{{}},
		Hooks:        configs.Hooks{},
	}
	st := libcontainer.State{BaseState: libcontainer.BaseState{Config: cfg}}
	if data, err := json.Marshal(&st); err == nil {
		_ = json.Unmarshal(data, &libcontainer.State{})
	}
	_, _ = json.Marshal(&specs.State{})
	if data, err := json.Marshal(&Bundle{Args: []string{""}}); err == nil {
		_ = json.Unmarshal(data, &Bundle{})
	}
	if !cgroups.IsCgroup2UnifiedMode() {
		_, _ = hierarchyRoots()
	}
}
