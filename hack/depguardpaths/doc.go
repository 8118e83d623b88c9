// Command depguardpaths fails when a depguard rule of .golangci.yml names
// something that no longer exists: a package path (deny or allow) that no
// package of the module or its dependencies has, or a file glob that no Go
// file of the module matches. depguard itself says nothing then — a rule
// whose package moved away simply stops guarding — so `make lint` runs
// this beside golangci-lint.
//
// Usage (from the module's root):
//
//	go run ./hack/depguardpaths [-config .golangci.yml] [-tags seccomp]
//
// It reads the packages with `go list`, never writes anything, and exits 1
// naming every stale entry (rule and path), 2 when it cannot read the
// configuration or list the module.
package main
