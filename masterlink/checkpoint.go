package masterlink

import (
	"encoding/json"
	"fmt"
	"github.com/brimnode/brim/internal/atomicfile"
	"os"
	"path/filepath"
	"strings"
)

// save checkpoints q as dir/<task>.json.
func (q *queue) save(dir string) error {
	b, err := json.Marshal(q)
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(dir, q.TaskID+".json"), b, 0o600)
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
		out[q.TaskID] = &q
	}
	return out, nil
}
