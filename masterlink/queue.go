package masterlink

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
	"github.com/google/uuid"
)

// update is one checkpointed status update.
type update struct {
	UUID      string       `json:"uuid"`
	State     pb.TaskState `json:"state"`
	Reason    string       `json:"reason,omitempty"`
	Message   string       `json:"message,omitempty"`
	ExitCode  *int         `json:"exitCode,omitempty"`
	Resources string       `json:"resources,omitempty"`
	Timestamp time.Time    `json:"timestamp"`
}

func newUpdate(st Status) update {
	u := update{UUID: uuid.NewString(), State: st.State, Reason: st.Reason, Message: st.Message, ExitCode: st.ExitCode, Timestamp: time.Now()}
	if !st.Resources.IsEmpty() {
		u.Resources = st.Resources.String()
	}
	return u
}

func (u *update) proto(taskID, agentID string) *pb.TaskStatus {
	st := &pb.TaskStatus{TaskId: taskID, AgentId: agentID, State: u.State, Reason: u.Reason, Message: u.Message,
		Uuid: u.UUID, TimestampUnixNano: u.Timestamp.UnixNano(), Resources: u.Resources}
	if u.ExitCode != nil {
		st.HasExitCode, st.ExitCode = true, int32(*u.ExitCode)
	}
	return st
}

// queue is a task's unacknowledged updates, oldest first, checkpointed in
// one file per task.
type queue struct {
	TaskID  string       `json:"taskId"`
	Last    pb.TaskState `json:"last"`
	Pending []update     `json:"pending,omitempty"`

	inflight string // UUID of the head as last sent on this stream
	retryAt  time.Time
	backoff  time.Duration
}

func (q *queue) save(dir string) error {
	b, err := json.Marshal(q)
	if err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(dir, q.TaskID+".json"), b)
}

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
