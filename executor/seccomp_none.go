//go:build !seccomp || !linux

package executor

import specs "github.com/opencontainers/runtime-spec/specs-go"

// defaultSeccomp returns nil: without the seccomp build tag libcontainer
// cannot load filters, so containers run without one.
func defaultSeccomp() *specs.LinuxSeccomp { return nil }

// SeccompEnabled reports whether containers get the default seccomp
// profile (the binary was built with the seccomp tag).
const SeccompEnabled = false
