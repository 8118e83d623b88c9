package demand

import (
	"flag"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/brimnode/brim/internal/testutil"
	"github.com/brimnode/brim/resources"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of testdata/*.txt")

// epoch is t=0 of every script: 2026-11-25 10:00:00 UTC.
var epoch = time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)

// TestScenarios runs the scripts testdata/*.txt (etcd-io/raft's
// interaction tests, with a small reader): each command is followed by
// ---- and the changes it caused, one per line. Commands:
//
//	new lead=1m pickup=2m          a book (drops the previous one);
//	                               looselead=1m: Config.LooseLead
//	agent a1 cpus:4;mem:4096       add an agent to the plan
//	load a1 cpus:3                 what DRF frameworks hold on it now
//	fixed a1 cpus:1                what of that preemption cannot reclaim
//	holding a1 cpus:2              what demands hold on it now
//	submit t=0 {...} | [{...}]     submit a demand or a batch at t
//	tick t=5m                      time passes
//	held a n=2 t=5m                an allocation opportunity: n tasks' worth held
//	claim a t=6m                   the framework launched on it
//	ended a ok=true t=20m          its tasks ended
//	cancel a t=7m
//	replace a t=7m                 re-place a relaxed demand
//	postpone a t=7m                re-place a loose demand short at its start
//	stretch a t=7m                 keep a's booking through t + its Duration (handed late)
//	hand a a1 n=1                  n tasks handed over on agent a1 (n < 0: back)
//	gone a1                        the agent left: no capacity until it is back
//	lose a1 t=5m                   the agent left: Book.AgentGone re-places its demands
//	update t=5m {...}              change a demand's document (Book.Update)
//	replan a t=5m                  re-place an ALLOCATING demand that no longer fits
//	lost a t=5m                    part of a whole hand-over cannot complete
//	show                           every demand, one line each
//
// t is an offset from 10:00:00 UTC (a Go duration). -rewrite writes the
// outputs back.
func TestScenarios(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.txt")
	if len(files) == 0 {
		t.Fatal("no scenario scripts")
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) { runScript(t, f) })
	}
}

func at(s string) (time.Time, error) {
	d, err := time.ParseDuration(s)
	return epoch.Add(d), err
}

func rel(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return "+" + t.Sub(epoch).String()
}

func renderChanges(cs []Change) string {
	var b strings.Builder
	for _, c := range cs {
		fmt.Fprintf(&b, "%s %s -> %s", c.Demand.ID, c.From, c.To)
		if c.Reason != "" {
			fmt.Fprintf(&b, " [%s]", c.Reason)
		}
		if c.Message != "" {
			fmt.Fprintf(&b, ": %s", c.Message)
		}
		b.WriteString("\n")
	}
	if b.Len() == 0 {
		return "no change"
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func renderDemand(d *Demand) string {
	s := fmt.Sprintf("%s %s start=%s end=%s", d.ID, d.State, rel(d.Start), rel(d.End))
	var pl []string
	for _, p := range d.Placement {
		s := fmt.Sprintf("%s:%d", p.Agent, p.Tasks)
		if p.Handed > 0 {
			s += fmt.Sprintf("(handed %d, %d to hold)", p.Handed, p.Unhanded())
		}
		pl = append(pl, s)
	}
	if len(pl) > 0 {
		s += " on=" + strings.Join(pl, ",")
	}
	if d.Reason != "" {
		s += fmt.Sprintf(" reason=%q", d.Reason)
	}
	if d.Opportunities > 0 {
		s += fmt.Sprintf(" opportunities=%d", d.Opportunities)
	}
	if d.Handed > 0 {
		s += fmt.Sprintf(" handed=%d", d.Handed)
	}
	if d.Launched > 0 {
		s += fmt.Sprintf(" launched=%d", d.Launched)
	}
	if d.Late {
		s += " late"
	}
	if d.Relaxed {
		s += " relaxed"
	}
	return s
}

func runScript(t *testing.T, path string) {
	var b *Book
	loads := map[string]resources.Resources{}    // the load command's
	fixed := map[string]resources.Resources{}    // the fixed command's
	holdings := map[string]resources.Resources{} // the holding command's
	cases := testutil.ReadScript(t, path)
	failed := false
	for i, c := range cases {
		name, rest, _ := strings.Cut(c.Cmd, " ")
		fields := strings.Fields(rest)
		kv := map[string]string{}
		var pos []string
		for _, f := range fields {
			if k, v, ok := strings.Cut(f, "="); ok && !strings.ContainsAny(k, "{[\"") {
				kv[k] = v
			} else {
				pos = append(pos, f)
			}
		}
		now, err := at(kv["t"])
		if kv["t"] == "" {
			now, err = epoch, nil
		}
		if err != nil {
			t.Fatalf("%s:%d: t: %v", path, c.Line, err)
		}
		dur := func(k string) time.Duration {
			d, err := time.ParseDuration(kv[k])
			if err != nil {
				t.Fatalf("%s:%d: %s: %v", path, c.Line, k, err)
			}
			return d
		}
		if name != "new" && b == nil {
			t.Fatalf("%s:%d: %s before new", path, c.Line, name)
		}
		var got string
		var cs []Change
		switch name {
		case "new":
			cfg := Config{Lead: dur("lead"), PickUp: dur("pickup")}
			if kv["looselead"] != "" {
				cfg.LooseLead = dur("looselead")
			}
			b, got = NewBook(cfg, NewPlan()), "ok"
		case "agent":
			b.plan.SetAgent(pos[0], resources.MustParse(pos[1]))
			got = "ok"
		case "gone":
			b.plan.SetAgent(pos[0], nil)
			got = "ok"
		case "replan":
			got = fmt.Sprintf("replanned: %v", b.Replan(pos[0], now))
		case "lose":
			got = fmt.Sprintf("moved: %v", b.AgentGone(pos[0], now))
		case "update":
			doc := strings.TrimSpace(rest[strings.Index(rest, " ")+1:])
			s, err := ParseSpec([]byte(doc))
			if err == nil {
				var d *Demand
				d, cs, err = b.Update(now, s)
				if err == nil && len(cs) == 0 {
					got = "unchanged: " + renderDemand(d)
				}
			}
			if err != nil {
				got = "error: " + err.Error()
			}
		case "load":
			loads[pos[0]] = resources.MustParse(pos[1])
			b.plan.SetLoadFunc(func(id string) resources.Resources { return loads[id] })
			got = "ok"
		case "fixed":
			fixed[pos[0]] = resources.MustParse(pos[1])
			b.plan.SetFixedLoadFunc(func(id string) resources.Resources { return fixed[id] })
			got = "ok"
		case "submit":
			doc := strings.TrimSpace(rest[strings.Index(rest, " ")+1:])
			var specs []*Spec
			if strings.HasPrefix(doc, "[") {
				for _, part := range splitBatch(doc) {
					s, err := ParseSpec([]byte(part))
					if err != nil {
						got = "error: " + err.Error()
						break
					}
					specs = append(specs, s)
				}
			} else if s, err := ParseSpec([]byte(doc)); err != nil {
				got = "error: " + err.Error()
			} else {
				specs = []*Spec{s}
			}
			if got == "" {
				_, cs, err = b.Submit(now, specs)
				if err != nil {
					got = "error: " + err.Error()
				}
			}
		case "tick":
			cs = b.Tick(now)
		case "hand":
			d, err := b.Get(pos[0])
			if err != nil {
				t.Fatalf("%s:%d: %v", path, c.Line, err)
			}
			n, _ := strconv.Atoi(kv["n"])
			d.Hand(pos[1], n)
			got = "ok"
		case "holding":
			holdings[pos[0]] = resources.MustParse(pos[1])
			b.plan.SetHeldFunc(func(id, _ string) resources.Resources { return holdings[id] })
			got = "ok"
		case "postpone":
			got = fmt.Sprintf("moved: %v", b.Postpone(pos[0], now))
		case "stretch":
			got = fmt.Sprintf("stretched: %v", b.Stretch(pos[0], now))
		case "held", "claim", "ended", "cancel", "replace", "lost":
			switch name {
			case "lost":
				cs, err = b.HandOverLost(pos[0], "agent left before the hand-over completed", now)
			case "held":
				n, _ := strconv.Atoi(kv["n"])
				cs, err = b.Held(pos[0], n, now)
			case "claim":
				cs, err = b.Claim(pos[0], now)
			case "ended":
				cs, err = b.Ended(pos[0], kv["ok"] == "true", "tasks ended", now)
			case "cancel":
				cs, err = b.Cancel(pos[0], "by the operator", now)
			case "replace":
				var moved bool
				moved, err = b.Replace(pos[0], now)
				if err == nil {
					got = fmt.Sprintf("replaced: %v", moved)
				}
			}
			if err != nil {
				got = "error: " + err.Error()
			}
		case "show":
			var lines []string
			for _, d := range b.List() {
				lines = append(lines, renderDemand(d))
			}
			got = strings.Join(lines, "\n")
			if got == "" {
				got = "no demands"
			}
		default:
			t.Fatalf("%s:%d: unknown command %q", path, c.Line, name)
		}
		if got == "" {
			got = renderChanges(cs)
		}
		if *rewrite {
			cases[i].Want = got
			continue
		}
		if got != c.Want {
			failed = true
			t.Errorf("%s:%d: %s\n got:\n%s\n want:\n%s", path, c.Line, c.Cmd, got, c.Want)
		}
	}
	if *rewrite {
		testutil.WriteScript(t, path, cases)
	}
	_ = failed
}

// splitBatch splits a JSON list of objects into the objects' texts.
func splitBatch(s string) []string {
	var out []string
	depth, start := 0, -1
	inStr := false
	for i, r := range s {
		switch {
		case inStr:
			if r == '"' && s[i-1] != '\\' {
				inStr = false
			}
		case r == '"':
			inStr = true
		case r == '{':
			if depth == 0 {
				start = i
			}
			depth++
		case r == '}':
			depth--
			if depth == 0 {
				out = append(out, s[start:i+1])
			}
		}
	}
	return out
}
