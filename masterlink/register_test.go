package masterlink

import (
	"fmt"
	"strings"
	"testing"

	"github.com/brimnode/brim/internal/speclimit"
	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
	"github.com/brimnode/brim/resources"
	"google.golang.org/protobuf/proto"
)

// TestRegisterMessagesPaged: an agent's tasks go in pages near
// speclimit.PageBytes, the Register first, the last page marked, every
// task once and in order; few tasks keep the one-message Register.
func TestRegisterMessagesPaged(t *testing.T) {
	snaps := func(n, pad int) []TaskSnapshot {
		var out []TaskSnapshot
		for i := range n {
			out = append(out, TaskSnapshot{State: pb.TaskState_TASK_RUNNING, Task: Task{ID: fmt.Sprintf("t%03d", i), FrameworkID: "fw",
				Resources: resources.MustParse("cpus:0.01;mem:1"), Command: []string{"sleep", "600", strings.Repeat("x", pad)}}})
		}
		return out
	}
	for _, tc := range []struct {
		name      string
		snaps     []TaskSnapshot
		wantPages int
	}{
		{"no tasks", nil, 1},
		{"few tasks", snaps(3, 10), 1},
		{"100 tasks of 90 KB", snaps(100, 90_000), 9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msgs := registerMessages(&pb.Register{AgentId: "a1"}, tc.snaps, func(TaskSnapshot) bool { return false })
			if len(msgs) < tc.wantPages {
				t.Fatalf("%d messages, want at least %d", len(msgs), tc.wantPages)
			}
			reg := msgs[0].GetRegister()
			if reg == nil || reg.AgentId != "a1" || reg.MoreTasks != (len(msgs) > 1) {
				t.Fatalf("first message %v, want a Register with more_tasks %v", msgs[0], len(msgs) > 1)
			}
			ids := []string{}
			for _, ts := range reg.Tasks {
				ids = append(ids, ts.Task.TaskId)
			}
			for i, m := range msgs {
				if n := proto.Size(m); n > speclimit.PageBytes+100_000 {
					t.Errorf("message %d is %d bytes, past the page budget %d", i, n, speclimit.PageBytes)
				}
				if i == 0 {
					continue
				}
				page := m.GetReregisterTasks()
				if page == nil || page.Last != (i == len(msgs)-1) || len(page.Tasks) == 0 {
					t.Fatalf("message %d: %T last=%v with %d tasks, want a page, last only at the end", i, m.GetMsg(), page.GetLast(), len(page.GetTasks()))
				}
				for _, ts := range page.Tasks {
					ids = append(ids, ts.Task.TaskId)
				}
			}
			var want []string
			for _, s := range tc.snaps {
				want = append(want, s.Task.ID)
			}
			if strings.Join(ids, ",") != strings.Join(want, ",") {
				t.Errorf("pages carry %v, want %v", ids, want)
			}
		})
	}
}
