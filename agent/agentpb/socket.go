package agentpb

import "fmt"

// MaxSocketPath is the longest path the agent's unix socket may have:
// sun_path's 108 bytes less the terminating NUL. A longer one fails at
// bind or connect with a bare "invalid argument".
const MaxSocketPath = 107

// CheckSocketPath returns an error naming the limit when path is too long
// for a unix socket; nil otherwise.
func CheckSocketPath(path string) error {
	if n := len(path); n > MaxSocketPath {
		return fmt.Errorf("socket path %q is %d bytes: a unix socket's path may have at most %d", path, n, MaxSocketPath)
	}
	return nil
}
