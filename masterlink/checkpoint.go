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

// save checkpoints q in files' directory as <task>.json, or <task>.<hash>.json for a
// task of a framework (16 hex digits of the framework ID's SHA-256: the
// ID is the client's to choose, the file name must stay a name). It is
// fsynced only while q holds a terminal update (see durable).
func (q *queue) save(files *atomicfile.Dir) error {
	b, err := json.Marshal(q)
	if err != nil {
		return err
	}
	return files.WriteFile(q.fileName(), b, 0o600, q.durable())
}

// fileName is q's checkpoint's name (see save).
func (q *queue) fileName() string {
	if q.FrameworkID == "" {
		return q.TaskID + ".json"
	}
	h := sha256.Sum256([]byte(q.FrameworkID))
	return q.TaskID + "." + hex.EncodeToString(h[:8]) + ".json"
}

// durable reports whether q's checkpoint must survive a crash of the
// machine: it holds a terminal update (how the task ended, which only the
// agent knows). Without one, the updates describe a task that a crash of
// the machine ends anyway (the master learns that when the agent
// registers again), and writing them costs every launch two fsyncs
// (STARTING, RUNNING) under the client's lock, milliseconds each on a
// busy host; a crash of the agent alone (kill -9) loses nothing either
// way: the rename is atomic and the page cache holds the file.
func (q *queue) durable() bool {
	for _, u := range q.Pending {
		if u.State.Terminal() {
			return true
		}
	}
	return false
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
