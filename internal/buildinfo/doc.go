// Package buildinfo says which build of brim is running: version, commit
// and build date, set by the Makefile through -ldflags -X, with the
// module's own VCS stamp as the fallback for a plain `go build`.
package buildinfo
