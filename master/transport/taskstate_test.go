package transport

import (
	"strings"
	"testing"

	"github.com/brimnode/brim/master"
	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
)

// TestTaskStateMatchesPB: the domain's task states are the proto's, by
// number, name and terminality, so that convert.go converts by number.
func TestTaskStateMatchesPB(t *testing.T) {
	if n := int(master.TaskError) + 1; len(pb.TaskState_name) != n {
		t.Errorf("the proto has %d task states, the domain %d", len(pb.TaskState_name), n)
	}
	for n, name := range pb.TaskState_name {
		p := pb.TaskState(n)
		s := taskStateFromPB(p)
		if got, want := s.String(), strings.TrimPrefix(name, "TASK_"); got != want {
			t.Errorf("state %d: domain name %q, proto %q", n, got, want)
		}
		if s.Terminal() != p.Terminal() {
			t.Errorf("%s: terminal %v in the domain, %v in the proto", name, s.Terminal(), p.Terminal())
		}
		if back := taskStateToPB(s); back != p {
			t.Errorf("%s: round trip gives %s", name, back)
		}
	}
	if got := master.TaskState(99).String(); got != "99" {
		t.Errorf("unknown state: %q", got)
	}
}
