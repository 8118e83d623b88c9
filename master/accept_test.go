package master

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/brimnode/brim/internal/speclimit"
	"github.com/brimnode/brim/resources"
)

// acceptFixture is a framework in roles ads and web with four offers:
// o1 and o2 on agent a1 (o2 holds a dynamic reservation of ads), o3 on
// agent a2, o4 on agent gone, which is disconnected. Task t0 exists.
func acceptFixture() acceptView {
	offer := func(id, agent, role, res string) *offerEntry {
		return &offerEntry{id: id, fw: "fw", agent: agent, role: role, res: resources.MustParse(res)}
	}
	f := &frameworkEntry{id: "fw", roles: []string{"ads", "web"}, offers: map[string]*offerEntry{
		"o1": offer("o1", "a1", "ads", "cpus:2;mem:1024"),
		"o2": offer("o2", "a1", "ads", "cpus:1;mem:512;cpus(ads,ops):1"),
		"o3": offer("o3", "a2", "ads", "cpus:4;mem:4096"),
		"o4": offer("o4", "gone", "ads", "cpus:4;mem:4096"),
	}}
	return acceptView{
		framework:      f,
		agentConnected: func(id string) bool { return id == "a1" || id == "a2" },
		taskExists:     func(id string) bool { return id == "t0" },
	}
}

func launchOf(tasks ...TaskSpec) Operation { return Operation{Kind: OpLaunch, Tasks: tasks} }

func task(id, res string) TaskSpec {
	return TaskSpec{Info: TaskInfo{ID: id, Command: []string{"true"}}, Resources: res}
}

// refusing is a refusal filter of d (ACCEPT, DECLINE).
func refusing(d time.Duration) *time.Duration { return &d }

func accept(ops []Operation, offers ...string) AcceptRequest {
	return AcceptRequest{FrameworkID: "fw", OfferIDs: offers, Operations: ops}
}

func TestPlanAcceptRejects(t *testing.T) {
	noCommand := task("t1", "cpus:1")
	noCommand.Info.Command = nil
	bigArg := task("t1", "cpus:1")
	bigArg.Info.Command = []string{"sh", strings.Repeat("x", 140_000)}
	manyLabels := task("t1", "cpus:1")
	manyLabels.Info.Labels = map[string]string{}
	for i := range speclimit.MaxTaskLabels + 1 {
		manyLabels.Info.Labels[fmt.Sprint(i)] = "v"
	}
	withImage := func(img, pull string, rw bool, cmd ...string) TaskSpec {
		ts := task("t1", "cpus:1")
		ts.Info.Command, ts.Info.Image, ts.Info.ImagePull, ts.Info.ImageRW = cmd, img, pull, rw
		return ts
	}
	reserve := func(res string) Operation { return Operation{Kind: OpReserve, Resources: res} }
	unreserve := func(res string) Operation { return Operation{Kind: OpUnreserve, Resources: res} }
	cases := []struct {
		name string
		req  AcceptRequest
		want error
	}{
		{"unknown framework", AcceptRequest{FrameworkID: "nope", OfferIDs: []string{"o1"}}, ErrNotFound},
		{"no offer", accept(nil), ErrInvalid},
		{"forged offer", accept(nil, "forged"), ErrStaleOffer},
		{"offer twice", accept(nil, "o1", "o1"), ErrStaleOffer},
		{"offers of two agents", accept(nil, "o1", "o3"), ErrInvalid},
		{"agent gone", accept(nil, "o4"), ErrStaleOffer},
		{"bad task ID", accept([]Operation{launchOf(task("../x", "cpus:1"))}, "o1"), ErrInvalid},
		{"empty task ID", accept([]Operation{launchOf(task("", "cpus:1"))}, "o1"), ErrInvalid},
		{"task ID in use", accept([]Operation{launchOf(task("t0", "cpus:1"))}, "o1"), ErrInvalid},
		{"task ID twice", accept([]Operation{launchOf(task("t1", "cpus:1")), launchOf(task("t1", "cpus:1"))}, "o1"), ErrInvalid},
		{"no command", accept([]Operation{launchOf(noCommand)}, "o1"), ErrInvalid},
		{"image reference malformed", accept([]Operation{launchOf(withImage("Bad/Upper:1", "", false))}, "o1"), ErrInvalid},
		{"image pull policy unknown", accept([]Operation{launchOf(withImage("app:1", "sometimes", false))}, "o1"), ErrInvalid},
		{"image pull without an image", accept([]Operation{launchOf(withImage("", "always", false, "true"))}, "o1"), ErrInvalid},
		{"read-write root without an image", accept([]Operation{launchOf(withImage("", "", true, "true"))}, "o1"), ErrInvalid},
		{"140 KB argument", accept([]Operation{launchOf(bigArg)}, "o1"), speclimit.ErrTooLarge},
		{"labels beyond the task's share", accept([]Operation{launchOf(manyLabels)}, "o1"), speclimit.ErrTooLarge},
		{"malformed resources", accept([]Operation{launchOf(task("t1", "cpus:lots"))}, "o1"), ErrInvalid},
		{"negative resources", accept([]Operation{launchOf(task("t1", "cpus:-1"))}, "o1"), ErrInvalid},
		{"mixed revocable", accept([]Operation{launchOf(task("t1", "cpus:1;cpus{REV}:1"))}, "o1"), resources.ErrMixedRevocable},
		{"no resources", accept([]Operation{launchOf(task("t1", ""))}, "o1"), ErrInvalid},
		{"more than offered", accept([]Operation{launchOf(task("t1", "cpus:3"))}, "o1"), ErrInsufficient},
		{"two tasks more than offered", accept([]Operation{launchOf(task("t1", "cpus:2"), task("t2", "cpus:1"))}, "o1"), ErrInsufficient},
		{"reservation not offered", accept([]Operation{launchOf(task("t1", "cpus(ads,ops):1"))}, "o1"), ErrInsufficient},
		{"reserve malformed", accept([]Operation{reserve("cpus(ads,ops):x")}, "o1"), ErrInvalid},
		{"reserve revocable", accept([]Operation{reserve("cpus{REV}:1")}, "o1"), ErrInvalid},
		{"reserve static", accept([]Operation{reserve("cpus(ads):1")}, "o1"), ErrInvalid},
		{"reserve unreserved", accept([]Operation{reserve("cpus:1")}, "o1"), ErrInvalid},
		{"reserve for another role", accept([]Operation{reserve("cpus(db,ops):1")}, "o1"), ErrInvalid},
		{"reserve nothing", accept([]Operation{reserve("")}, "o1"), ErrInvalid},
		{"reserve more than offered", accept([]Operation{reserve("cpus(ads,ops):3")}, "o1"), ErrInsufficient},
		{"reserve then launch what it took", accept([]Operation{reserve("cpus(ads,ops):2"), launchOf(task("t1", "cpus:1"))}, "o1"), ErrInsufficient},
		{"unreserve malformed", accept([]Operation{unreserve("cpus(ads")}, "o2"), ErrInvalid},
		{"unreserve unreserved", accept([]Operation{unreserve("cpus:1")}, "o2"), ErrInvalid},
		{"unreserve static", accept([]Operation{unreserve("cpus(ads):1")}, "o2"), ErrInvalid},
		{"unreserve nothing", accept([]Operation{unreserve("")}, "o2"), ErrInvalid},
		{"unreserve not offered", accept([]Operation{unreserve("cpus(ads,ops):2")}, "o2"), ErrInsufficient},
		{"unknown operation", accept([]Operation{{Kind: OpUnknown}}, "o1"), ErrInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := acceptFixture()
			p, err := planAccept(v, tc.req)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
			if p.agent != "" || p.offers != nil || p.launches != nil || p.reservations != nil {
				t.Errorf("a rejection returned a plan: %+v", p)
			}
			if len(v.framework.offers) != 4 || !v.framework.offers["o1"].res.Equal(resources.MustParse("cpus:2;mem:1024")) {
				t.Errorf("planAccept changed the offers: %v", v.framework.offers)
			}
		})
	}
}

func TestPlanAcceptPlans(t *testing.T) {
	refuse := 5 * time.Second
	type launch struct{ id, res, role string }
	type reservation struct {
		res     string
		reserve bool
	}
	cases := []struct {
		name         string
		req          AcceptRequest
		offers       []string
		unused       map[string]string
		launches     []launch
		reservations []reservation
	}{
		{name: "no operation gives everything back",
			req:    accept(nil, "o1"),
			offers: []string{"o1"}, unused: map[string]string{"ads": "cpus:2;mem:1024"}},
		{name: "a task from an image needs no command",
			req:    accept([]Operation{launchOf(TaskSpec{Info: TaskInfo{ID: "t1", Image: "registry.example.com/app@sha256:" + strings.Repeat("a", 64)}, Resources: "cpus:1;mem:128"})}, "o1"),
			offers: []string{"o1"}, unused: map[string]string{"ads": "cpus:1;mem:896"},
			launches: []launch{{"t1", "cpus:1;mem:128", "ads"}}},
		{name: "one task",
			req:    accept([]Operation{launchOf(task("t1", "cpus:1;mem:128"))}, "o1"),
			offers: []string{"o1"}, unused: map[string]string{"ads": "cpus:1;mem:896"},
			launches: []launch{{"t1", "cpus:1;mem:128", "ads"}}},
		{name: "two offers of one agent add up",
			req:    accept([]Operation{launchOf(task("t1", "cpus:3;mem:1536"))}, "o1", "o2"),
			offers: []string{"o1", "o2"}, unused: map[string]string{"ads": "cpus(ads,ops):1"},
			launches: []launch{{"t1", "cpus:3;mem:1536", "ads"}}},
		{name: "reserved resources launch",
			req:    accept([]Operation{launchOf(task("t1", "cpus(ads,ops):1;mem:64"))}, "o2"),
			offers: []string{"o2"}, unused: map[string]string{"ads": "cpus:1;mem:448"},
			launches: []launch{{"t1", "cpus(ads,ops):1;mem:64", "ads"}}},
		{name: "reserve then launch on the rest",
			req:    accept([]Operation{{Kind: OpReserve, Resources: "cpus(web,ops):1;mem(web,ops):512"}, launchOf(task("t1", "cpus:1;mem:512"))}, "o1"),
			offers: []string{"o1"}, unused: map[string]string{"ads": ""},
			reservations: []reservation{{"cpus(web,ops):1;mem(web,ops):512", true}},
			launches:     []launch{{"t1", "cpus:1;mem:512", "ads"}}},
		{name: "unreserve",
			req:    accept([]Operation{{Kind: OpUnreserve, Resources: "cpus(ads,ops):1"}}, "o2"),
			offers: []string{"o2"}, unused: map[string]string{"ads": "cpus:1;mem:512"},
			reservations: []reservation{{"cpus(ads,ops):1", false}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.req.Refuse = &refuse
			p, err := planAccept(acceptFixture(), tc.req)
			if err != nil {
				t.Fatal(err)
			}
			if p.framework != "fw" || p.agent != "a1" || p.refuse != &refuse {
				t.Errorf("plan for framework %q agent %q refuse %v", p.framework, p.agent, p.refuse)
			}
			if len(p.offers) != len(tc.offers) {
				t.Fatalf("offers used %v, want %v", p.offers, tc.offers)
			}
			for i := range p.offers {
				if p.offers[i] != tc.offers[i] {
					t.Errorf("offers used %v, want %v", p.offers, tc.offers)
				}
			}
			if len(p.unused) != len(tc.unused) {
				t.Errorf("unused %v, want %v", p.unused, tc.unused)
			}
			for role, want := range tc.unused {
				if !p.unused[role].Equal(resources.MustParse(want)) {
					t.Errorf("unused of %s: %s, want %s", role, p.unused[role], want)
				}
			}
			if len(p.launches) != len(tc.launches) {
				t.Fatalf("launches %+v, want %+v", p.launches, tc.launches)
			}
			for i, l := range tc.launches {
				got := p.launches[i]
				if got.info.ID != l.id || !got.res.Equal(resources.MustParse(l.res)) || got.role != l.role {
					t.Errorf("launch %d: %s %s in %s, want %+v", i, got.info.ID, got.res, got.role, l)
				}
			}
			if len(p.reservations) != len(tc.reservations) {
				t.Fatalf("reservations %+v, want %+v", p.reservations, tc.reservations)
			}
			for i, r := range tc.reservations {
				got := p.reservations[i]
				if !got.res.Equal(resources.MustParse(r.res)) || got.reserve != r.reserve {
					t.Errorf("reservation %d: %s reserve=%v, want %+v", i, got.res, got.reserve, r)
				}
			}
		})
	}
}

// A root task needs the run_as_root ACL for the role its resources come
// from: without it the task alone is refused (TASK_ERROR) and its
// resources go back; with it, or in a user namespace, it launches.
func TestPlanAcceptRunAsRoot(t *testing.T) {
	asUser := func(id, user string, userns bool) TaskSpec {
		ts := task(id, "cpus:1;mem:128")
		ts.Info.User, ts.Info.Userns = user, userns
		return ts
	}
	deny := func(role string) error { return fmt.Errorf("no rule for %s: %w", role, ErrForbidden) }
	allow := func(string) error { return nil }
	cases := []struct {
		name     string
		may      func(string) error
		task     TaskSpec
		refused  bool
		runRoot  bool
		unusedOf string
	}{
		{"root refused without the ACL", deny, asUser("t1", "root", false), true, false, "cpus:2;mem:1024"},
		{"uid 0 with a group refused", deny, asUser("t1", "0:0", false), true, false, "cpus:2;mem:1024"},
		{"root refused without an authorizer", nil, asUser("t1", "root:wheel", false), true, false, "cpus:2;mem:1024"},
		{"root allowed with the ACL", allow, asUser("t1", "root", false), false, true, "cpus:1;mem:896"},
		{"root in a user namespace needs no ACL", deny, asUser("t1", "root", true), false, false, "cpus:1;mem:896"},
		{"a non-root user needs no ACL", deny, asUser("t1", "nobody", false), false, false, "cpus:1;mem:896"},
		{"the default user needs no ACL", deny, asUser("t1", "", false), false, false, "cpus:1;mem:896"},
		{"a numeric non-root uid", deny, asUser("t1", "1000:1000", false), false, false, "cpus:1;mem:896"},
		{"the ACL is passed on for any user", allow, asUser("t1", "toor", false), false, true, "cpus:1;mem:896"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := acceptFixture()
			v.mayRunAsRoot = tc.may
			p, err := planAccept(v, accept([]Operation{launchOf(tc.task)}, "o1"))
			if err != nil {
				t.Fatal(err)
			}
			if !p.unused["ads"].Equal(resources.MustParse(tc.unusedOf)) {
				t.Errorf("unused %s, want %s", p.unused["ads"], tc.unusedOf)
			}
			if tc.refused {
				if len(p.launches) != 0 || len(p.refused) != 1 {
					t.Fatalf("launches %+v refused %+v, want one refused", p.launches, p.refused)
				}
				r := p.refused[0]
				if r.id != "t1" || r.reason != ReasonTaskUnauthorized || !strings.Contains(r.message, "run_as_root") {
					t.Errorf("refused %+v: want t1, %s, a message naming run_as_root", r, ReasonTaskUnauthorized)
				}
				return
			}
			if len(p.refused) != 0 || len(p.launches) != 1 {
				t.Fatalf("launches %+v refused %+v, want one launch", p.launches, p.refused)
			}
			if p.launches[0].runAsRoot != tc.runRoot {
				t.Errorf("runAsRoot %v, want %v", p.launches[0].runAsRoot, tc.runRoot)
			}
		})
	}
}
