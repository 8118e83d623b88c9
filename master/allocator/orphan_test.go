package allocator

import (
	"errors"
	"testing"

	"github.com/brimnode/brim/resources"
)

// A task of a framework that has not subscribed again (after a master
// restart) ends before the framework comes back: its usage is returned to
// the agent, and the framework, once back, holds nothing for it. Found by
// the chaos harness (seeds 3, 8, 9): RecoverRole failed with "framework
// not found" and the re-subscribed framework held cpus:0.1;mem:32 with no
// task behind it.
func TestRecoverOrphanUsage(t *testing.T) {
	a, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]resources.Resources{"fw": resources.MustParse("cpus:0.2;mem:64")}
	if err := a.AddAgent(AgentInfo{ID: "ag", Total: resources.MustParse("cpus:4;mem:4096")}, used); err != nil {
		t.Fatal(err)
	}
	// One of the framework's two tasks ends while it is away.
	if err := a.RecoverRole("fw", "r", "ag", resources.MustParse("cpus:0.1;mem:32"), nil); err != nil {
		t.Fatalf("recover orphan usage: %v", err)
	}
	// More than it holds, or on an agent it has nothing on, is refused.
	if err := a.RecoverRole("fw", "r", "ag", resources.MustParse("cpus:1;mem:32"), nil); !errors.Is(err, ErrInsufficient) {
		t.Errorf("recover beyond the orphan usage: %v, want ErrInsufficient", err)
	}
	if err := a.RecoverRole("ghost", "r", "ag", resources.MustParse("cpus:0.1"), nil); !errors.Is(err, ErrNotFound) {
		t.Errorf("recover of a framework with nothing here: %v, want ErrNotFound", err)
	}
	if err := a.AddFramework(FrameworkInfo{ID: "fw", Roles: []string{"r"}}, nil); err != nil {
		t.Fatal(err)
	}
	var got resources.Resources
	for _, s := range a.FrameworkShares() {
		if s.FrameworkID == "fw" {
			got = got.Add(s.Allocated)
		}
	}
	if want := resources.MustParse("cpus:0.1;mem:32"); !got.Equal(want) {
		t.Errorf("framework holds %s after re-subscribing, want the remaining task's %s", got, want)
	}
}
