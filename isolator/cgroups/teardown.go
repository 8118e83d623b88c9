package cgroups

// TeardownReport is what Teardown did.
type TeardownReport struct {
	// Killed are the processes it sent SIGKILL to.
	Killed []int
	// Removed are the groups it removed, as cgroup paths (the parent's
	// children, then the parent), each once whatever the hierarchies.
	Removed []string
}
