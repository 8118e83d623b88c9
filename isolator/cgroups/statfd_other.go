//go:build !linux

package cgroups

// fdSource reads a group's stat files by path on this platform (the
// descriptor cache needs pread on kernfs). Not safe for concurrent use.
type fdSource struct {
	pathSource
	buf *[]byte
}

func newFDSource(paths [nStatRoles]string, _ bool) *fdSource {
	return &fdSource{pathSource: pathSource(paths)}
}

func (s *fdSource) close() {}
