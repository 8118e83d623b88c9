package masterlink

import (
	"encoding/json"
	"errors"
	"fmt"
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
	return writeFileAtomic(filepath.Join(dir, q.TaskID+".json"), b)
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

// writeFileAtomic replaces path with data durably (temp file, fsync,
// rename, fsync of the directory).
func writeFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		return errors.Join(err, os.Remove(tmp))
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
