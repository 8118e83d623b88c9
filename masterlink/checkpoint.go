package masterlink

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"github.com/brimnode/brim/internal/atomicfile"
	"os"
	"path/filepath"
	"strings"
)

// save checkpoints q as dir/<task>.json, or dir/<task>.<hash>.json for a
// task of a framework (16 hex digits of the framework ID's SHA-256: the
// ID is the client's to choose, the file name must stay a name).
func (q *queue) save(dir string) error {
	b, err := json.Marshal(q)
	if err != nil {
		return err
	}
	name := q.TaskID + ".json"
	if q.FrameworkID != "" {
		h := sha256.Sum256([]byte(q.FrameworkID))
		name = q.TaskID + "." + hex.EncodeToString(h[:8]) + ".json"
	}
	return atomicfile.WriteFile(filepath.Join(dir, name), b, 0o600)
}

// loadQueues reads the checkpoints under dir.
func loadQueues(dir string) (map[string]*queue, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read status updates: %w", err)
	}
	out := map[string]*queue{}
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("read status updates: %w", err)
		}
		var q queue
		if err := json.Unmarshal(b, &q); err != nil {
			return nil, fmt.Errorf("read status updates %s: %w", e.Name(), err)
		}
		out[q.key()] = &q
	}
	return out, nil
}
