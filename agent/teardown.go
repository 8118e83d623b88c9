package agent

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/brimnode/brim/internal/atomicfile"
)

// LockStateDir takes the state dir's lock as a running agent holds it,
// for a command that must not run beside an agent (`brim agent cleanup`):
// the caller closes it. Errors wrap ErrAgentRunning when an agent holds
// it (the message names its PID when the kernel lists one).
func LockStateDir(dir string) (io.Closer, error) {
	return lockStateDir(dir)
}

// RemoveCheckpoints removes the checkpoint of stateDir (the agent's
// records of its containers, quarantined ones too) with no agent running,
// once the containers are gone (`brim agent cleanup`), and returns what
// it removed, one line each ("removed …"). The agent's ID and the master link's state
// stay: an agent started again is the same agent, with no containers.
func RemoveCheckpoints(stateDir string) ([]string, error) {
	dir := filepath.Join(stateDir, "checkpoint")
	// The records' alternates and spares (atomicfile.Dir): no record.
	if err := os.RemoveAll(atomicfile.WorkDir(dir)); err != nil {
		return nil, fmt.Errorf("remove checkpoints: %w", err)
	}
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("remove checkpoints: %w", err)
	}
	var out []string
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return out, fmt.Errorf("remove checkpoints: %w", err)
		}
		if id, ok := strings.CutSuffix(e.Name(), ".json"); ok {
			out = append(out, "removed checkpoint of container "+id)
		} else {
			out = append(out, "removed checkpoint file "+e.Name())
		}
	}
	if err := os.Remove(dir); err != nil {
		return out, fmt.Errorf("remove checkpoints: %w", err)
	}
	return out, nil
}
