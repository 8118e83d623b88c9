package demandplan

import (
	"flag"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/brimnode/brim/demand"
	"github.com/brimnode/brim/internal/testutil"
	"github.com/brimnode/brim/master/allocator"
	"github.com/brimnode/brim/resources"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of testdata/*.txt")

// epoch is t=0 of every script: 2026-11-25 10:00:00 UTC.
var epoch = time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)

// TestScenarios runs the scripts testdata/*.txt on a planner over a real
// allocator and a scripted cluster (no I/O): each command is followed by
// ---- and what it caused. Commands:
//
//	new lead=1m reclaim=15s preempt=true lend=true   a planner (drops the last one)
//	agent a1 cpus:4;mem:4096;cpus(r1):1          an agent (reserved parts: reservations)
//	framework f1 r1 revocable                    a DRF framework in role r1 (revocable: takes revocable)
//	quota r1 cpus:2                              role r1's guarantee
//	task t1 f1 a1 cpus:1;mem:64 t=0              f1 launches a task on a1 (from an offer of DRF's)
//	offer f1 a1                                  f1 is offered a1 and keeps the offer outstanding
//	submit t=0 {...}                             the demands' framework ("timed") submits
//	update t=0 {...}                             a new document for a demand
//	cycle t=5m                                   one allocation cycle: Cycle, effects, TopUp, effects
//	launch d1 t=5m                               "timed" launches a task on each offer of d1
//	end t1 t=6m                                  a task ends (killed ones end this way too)
//	cancel d1 t=6m
//	lose a1 t=6m                                 the agent left
//	drf                                          DRF's cycle: its offers, all declined
//	show                                         demands, then per agent: held, lent, overdraft
//
// t is an offset from 10:00:00 UTC. -rewrite writes the outputs back.
func TestScenarios(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.txt")
	if len(files) == 0 {
		t.Fatal("no scenario scripts")
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) { runScript(t, f) })
	}
}

// world is the scripted cluster the planner asks (Cluster).
type world struct {
	agents []string
	down   map[string]bool
	tasks  map[string]*wtask // by ID
	offers map[string]Offer  // outstanding offers, DRF's and the planner's
	seq    int
	clk    *fakeClock
	alloc  *allocator.Allocator
	p      *Planner
}

type wtask struct {
	Task
	agent  string
	demand string
}

type fakeClock struct{ t time.Time }

func (c *fakeClock) Now() time.Time { return c.t }

func (w *world) Ready(agent string) bool { return !w.down[agent] }

func (w *world) Framework(fw string) (bool, bool) { return true, true }

func (w *world) Tasks(agent string) []Task {
	var out []Task
	for _, id := range sortedKeys(w.tasks) {
		if t := w.tasks[id]; t.agent == agent {
			out = append(out, t.Task)
		}
	}
	return out
}

func (w *world) Offers(agent string) []Offer {
	var out []Offer
	for _, id := range sortedKeys(w.offers) {
		if o := w.offers[id]; o.Agent == agent {
			out = append(out, o)
		}
	}
	return out
}

// apply carries out effects as the master does and describes them.
func (w *world) apply(eff Effects, now time.Time, out *[]string) {
	for _, c := range eff.Changes {
		line := fmt.Sprintf("%s %s -> %s", c.Demand.ID, c.From, c.To)
		if c.Reason != "" {
			line += fmt.Sprintf(" [%s]", c.Reason)
		}
		if c.Message != "" {
			line += ": " + c.Message
		}
		*out = append(*out, line)
	}
	for _, id := range eff.Rescind {
		o, ok := w.offers[id]
		if !ok {
			continue
		}
		delete(w.offers, id)
		zero := time.Duration(0)
		if err := w.alloc.RecoverRole(o.Framework, o.Role, o.Agent, o.Resources, &zero); err != nil {
			*out = append(*out, "error: "+err.Error())
		}
		*out = append(*out, fmt.Sprintf("rescind %s (%s on %s: %s)", id, o.Framework, o.Agent, o.Resources))
		var more []string
		w.apply(w.p.OfferGone(id, w.Ready(o.Agent), now), now, &more)
		*out = append(*out, more...)
	}
	for _, o := range eff.Offers {
		w.offers[o.ID] = o
		*out = append(*out, fmt.Sprintf("offer %s to %s for %s on %s: %s", o.ID, o.Framework, o.Demand, o.Agent, o.Resources))
	}
	for _, k := range eff.Kill {
		kind := "kill"
		if k.Preempted {
			kind = "preempt"
		}
		*out = append(*out, fmt.Sprintf("%s %s (%s on %s): %s", kind, k.Task, k.Framework, k.Agent, k.Message))
	}
	for _, err := range eff.Errs {
		*out = append(*out, "error: "+err.Error())
	}
}

// launch has framework fw take res of an offer of agent for a task:
// every other framework is suppressed for the cycle, what it does not
// use goes back.
func (w *world) launch(fw, agent string, res resources.Resources, keepAll bool) (allocator.Offer, error) {
	var others []string
	for _, s := range w.alloc.FrameworkShares() {
		if s.FrameworkID != fw && !s.Suppressed && !slices.Contains(others, s.FrameworkID) {
			others = append(others, s.FrameworkID)
		}
	}
	for _, f := range others {
		w.alloc.Suppress(f)
	}
	defer func() {
		for _, f := range others {
			w.alloc.Revive(f)
		}
	}()
	var got allocator.Offer
	found := false
	zero := time.Duration(0)
	for _, o := range w.alloc.Allocate() {
		rest := o.Resources
		if !found && o.FrameworkID == fw && o.AgentID == agent && o.Resources.Contains(res) {
			found, got = true, o
			rest = o.Resources.Subtract(res)
			if keepAll {
				rest = nil
			}
		}
		if !rest.IsEmpty() {
			if err := w.alloc.RecoverRole(o.FrameworkID, o.Role, o.AgentID, rest, &zero); err != nil {
				return got, err
			}
		}
	}
	if !found {
		return got, fmt.Errorf("no offer of %s on %s for %s", res, agent, fw)
	}
	return got, nil
}

func parseArgs(rest string) (pos []string, kv map[string]string) {
	kv = map[string]string{}
	for _, f := range strings.Fields(rest) {
		if k, v, ok := strings.Cut(f, "="); ok && !strings.ContainsAny(k, "{[\"") {
			kv[k] = v
		} else {
			pos = append(pos, f)
		}
	}
	return pos, kv
}

func runScript(t *testing.T, path string) {
	cases := testutil.ReadScript(t, path)
	var w *world
	for i, c := range cases {
		name, rest, _ := strings.Cut(c.Cmd, " ")
		pos, kv := parseArgs(rest)
		now := epoch
		if kv["t"] != "" {
			d, err := time.ParseDuration(kv["t"])
			if err != nil {
				t.Fatalf("%s:%d: t: %v", path, c.Line, err)
			}
			now = epoch.Add(d)
		}
		if name != "new" && w == nil {
			t.Fatalf("%s:%d: %s before new", path, c.Line, name)
		}
		if w != nil {
			w.clk.t = now
		}
		var out []string
		fail := func(err error) { out = append(out, "error: "+err.Error()) }
		switch name {
		case "new":
			w = newWorld(t, path, c.Line, kv)
			out = append(out, "ok")
		case "agent":
			total := resources.MustParse(pos[1])
			if err := w.alloc.AddAgent(allocator.AgentInfo{ID: pos[0], Total: total}, nil); err != nil {
				fail(err)
				break
			}
			w.agents = append(w.agents, pos[0])
			w.p.SetAgent(pos[0], total)
			out = append(out, "ok")
		case "framework":
			info := allocator.FrameworkInfo{ID: pos[0], Roles: []string{pos[1]}, Capabilities: allocator.Capabilities{Revocable: slices.Contains(pos, "revocable")}}
			if err := w.alloc.AddFramework(info, nil); err != nil {
				fail(err)
				break
			}
			out = append(out, "ok")
		case "quota":
			if err := w.alloc.SetQuota(pos[0], allocator.Quota{Guarantee: resources.MustParse(pos[1])}); err != nil {
				fail(err)
				break
			}
			out = append(out, "ok")
		case "task":
			o, err := w.launch(pos[1], pos[2], resources.MustParse(pos[3]), false)
			if err != nil {
				fail(err)
				break
			}
			w.tasks[pos[0]] = &wtask{Task: Task{ID: pos[0], Framework: pos[1], Role: o.Role, Resources: resources.MustParse(pos[3]), Launched: now}, agent: pos[2]}
			out = append(out, "ok")
		case "offer":
			o, err := w.launch(pos[0], pos[1], resources.Resources{}, true)
			if err != nil {
				fail(err)
				break
			}
			w.seq++
			id := fmt.Sprintf("drf%d", w.seq)
			w.offers[id] = Offer{ID: id, Framework: o.FrameworkID, Agent: o.AgentID, Role: o.Role, Resources: o.Resources}
			out = append(out, fmt.Sprintf("%s: %s", id, o.Resources))
		case "submit", "update":
			doc := strings.TrimSpace(rest[strings.Index(rest, " ")+1:])
			s, err := demand.ParseSpec([]byte(doc))
			if err != nil {
				fail(err)
				break
			}
			if s.Framework == "" {
				s.Framework, s.Role = "timed", "timed"
			}
			var eff Effects
			if name == "submit" {
				_, eff, err = w.p.Submit(now, []*demand.Spec{s})
			} else {
				_, eff, err = w.p.Update(now, s)
			}
			if err != nil {
				fail(err)
				break
			}
			w.apply(eff, now, &out)
		case "cycle":
			w.apply(w.p.Cycle(now), now, &out)
			w.apply(w.p.TopUp(now), now, &out)
		case "launch":
			for _, id := range sortedKeys(w.offers) {
				o := w.offers[id]
				if o.Demand != pos[0] {
					continue
				}
				delete(w.offers, id)
				d, _ := w.p.Get(o.Demand)
				per := d.Spec().Resources
				var ids []string
				for n := unitsIn(o.Resources, per); n > 0; n-- {
					w.seq++
					tid := fmt.Sprintf("%s-t%d", o.Demand, w.seq)
					w.tasks[tid] = &wtask{Task: Task{ID: tid, Framework: o.Framework, Role: o.Role, Resources: per, Launched: now}, agent: o.Agent, demand: o.Demand}
					ids = append(ids, tid)
				}
				out = append(out, fmt.Sprintf("launched %s on %s", strings.Join(ids, ","), o.Agent))
				w.apply(w.p.Launched([]string{id}, ids, now), now, &out)
			}
		case "end":
			tk := w.tasks[pos[0]]
			if tk == nil {
				fail(fmt.Errorf("no task %s", pos[0]))
				break
			}
			delete(w.tasks, pos[0])
			zero := time.Duration(0)
			if err := w.alloc.RecoverRole(tk.Framework, tk.Role, tk.agent, tk.Resources, &zero); err != nil {
				fail(err)
			}
			w.apply(w.p.TaskEnded(pos[0], tk.Framework, true, now), now, &out)
			out = append(out, "ended "+pos[0])
		case "cancel":
			eff, err := w.p.Cancel(pos[0], "by the operator", now)
			if err != nil {
				fail(err)
				break
			}
			w.apply(eff, now, &out)
		case "lose":
			w.down[pos[0]] = true
			w.p.AgentGone(pos[0], now)
			out = append(out, "ok")
		case "drf":
			zero := time.Duration(0)
			for _, o := range w.alloc.Allocate() {
				out = append(out, fmt.Sprintf("drf offer to %s on %s: %s", o.FrameworkID, o.AgentID, o.Resources))
				if err := w.alloc.RecoverRole(o.FrameworkID, o.Role, o.AgentID, o.Resources, &zero); err != nil {
					fail(err)
				}
			}
			if len(out) == 0 {
				out = append(out, "no offers")
			}
		case "show":
			out = w.show()
		default:
			t.Fatalf("%s:%d: unknown command %q", path, c.Line, name)
		}
		got := strings.Join(out, "\n")
		if got == "" {
			got = "no change"
		}
		if *rewrite {
			cases[i].Want = got
			continue
		}
		if got != c.Want {
			t.Errorf("%s:%d: %s\n got:\n%s\n want:\n%s", path, c.Line, c.Cmd, got, c.Want)
		}
	}
	if *rewrite {
		testutil.WriteScript(t, path, cases)
	}
}

func newWorld(t *testing.T, path string, line int, kv map[string]string) *world {
	dur := func(k, def string) time.Duration {
		v := kv[k]
		if v == "" {
			v = def
		}
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("%s:%d: %s: %v", path, line, k, err)
		}
		return d
	}
	w := &world{down: map[string]bool{}, tasks: map[string]*wtask{}, offers: map[string]Offer{}, clk: &fakeClock{t: epoch}}
	a, err := allocator.New(allocator.Options{Clock: w.clk, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.AddFramework(allocator.FrameworkInfo{ID: "timed", Roles: []string{"timed"}, SuppressedRoles: []string{"timed"}}, nil); err != nil {
		t.Fatal(err)
	}
	w.alloc = a
	n := 0
	w.p = New(Options{Lead: dur("lead", "1m"), PickUp: dur("pickup", "5m"), ReclaimAhead: dur("reclaim", "15s"),
		Preempt: kv["preempt"] == "true", Lend: kv["lend"] == "true",
		NewID: func() string { n++; return fmt.Sprintf("o%d", n) }}, a, w)
	return w
}

func (w *world) show() []string {
	var out []string
	for _, d := range w.p.List() {
		s := fmt.Sprintf("%s %s", d.ID, d.State)
		if !d.Start.IsZero() {
			s += " start=+" + d.Start.Sub(epoch).String()
		}
		var on []string
		for _, sl := range d.Placement {
			on = append(on, fmt.Sprintf("%s:%d", sl.Agent, sl.Tasks))
		}
		if len(on) > 0 {
			s += " on=" + strings.Join(on, ",")
		}
		if d.Reason != "" {
			s += fmt.Sprintf(" reason=%q", d.Reason)
		}
		out = append(out, s)
	}
	for _, ag := range w.agents {
		s := ag
		if h := w.alloc.HeldOn(ag, ""); len(h) > 0 {
			s += " held=" + h.String()
		}
		if l := w.alloc.Lent(ag); len(l) > 0 {
			s += " lent=" + l.String()
		}
		if o := w.alloc.Overdraft(ag); len(o) > 0 {
			s += " overdraft=" + o.String()
		}
		var ts []string
		for _, t := range w.Tasks(ag) {
			ts = append(ts, t.ID)
		}
		if len(ts) > 0 {
			s += " tasks=" + strings.Join(ts, ",")
		}
		out = append(out, s)
	}
	return out
}
