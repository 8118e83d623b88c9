//go:build !linux

package agent

import (
	"fmt"
	"os"
)

func lockStateDir(dir string) (*os.File, error) {
	return nil, fmt.Errorf("lock state dir %s: %w", dir, ErrNotSupported)
}
