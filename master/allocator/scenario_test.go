package allocator

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/brimnode/brim/resources"
)

// Scenarios as data, in the manner of etcd-io/raft's interaction tests:
// testdata/*.txt hold blocks of
//
//	command key=value ...
//	optional input lines
//	----
//	expected output
//
// separated by blank lines; '#' lines between blocks are comments. Every
// file starts from a fresh allocator (seed 1, a fake clock). Run with
// -rewrite to write the actual output back (then read the diff).
var rewrite = flag.Bool("rewrite", false, "rewrite testdata/*.txt with the actual output")

type scenarioCase struct {
	pos      string
	cmd      string
	args     map[string]string
	flags    map[string]bool
	input    []string
	expected string
	// lines of the file before the expected output, for rewriting
	head []string
}

func parseScenarios(t *testing.T, path string) (cases []scenarioCase, tail []string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	var pending []string // comments and blank lines before a command
	line := 0
	next := func() (string, bool) {
		if !sc.Scan() {
			return "", false
		}
		line++
		return sc.Text(), true
	}
	for {
		l, ok := next()
		if !ok {
			for len(pending) > 0 && pending[len(pending)-1] == "" {
				pending = pending[:len(pending)-1]
			}
			return cases, pending
		}
		if strings.TrimSpace(l) == "" || strings.HasPrefix(l, "#") {
			pending = append(pending, l)
			continue
		}
		c := scenarioCase{pos: fmt.Sprintf("%s:%d", filepath.Base(path), line), args: map[string]string{}, flags: map[string]bool{}}
		c.head = append(pending, l)
		pending = nil
		fields := strings.Fields(l)
		c.cmd = fields[0]
		for _, a := range fields[1:] {
			if k, v, ok := strings.Cut(a, "="); ok {
				c.args[k] = v
			} else {
				c.flags[a] = true
			}
		}
		for {
			l, ok := next()
			if !ok {
				t.Fatalf("%s: no ---- after the command", c.pos)
			}
			c.head = append(c.head, l)
			if l == "----" {
				break
			}
			c.input = append(c.input, l)
		}
		var exp []string
		for {
			l, ok := next()
			if !ok || l == "" {
				break
			}
			exp = append(exp, l)
		}
		c.expected = strings.Join(exp, "\n")
		cases = append(cases, c)
		pending = append(pending, "")
	}
}

func TestScenarios(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios: %v", err)
	}
	for _, path := range files {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txt"), func(t *testing.T) {
			cases, tail := parseScenarios(t, path)
			s := &scenario{t: t}
			var out []string
			for _, c := range cases {
				got := strings.TrimRight(s.run(&c), "\n")
				if got != c.expected && !*rewrite {
					t.Errorf("%s: %s\ngot:\n%s\nwant:\n%s", c.pos, c.head[len(c.head)-len(c.input)-2], got, c.expected)
				}
				out = append(out, c.head...)
				if got != "" {
					out = append(out, got)
				}
			}
			out = append(out, tail...)
			if *rewrite {
				if err := os.WriteFile(path, []byte(strings.Join(out, "\n")+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// scenario is the state one file drives.
type scenario struct {
	t   *testing.T
	a   *Allocator
	clk *fakeClock
}

func (s *scenario) run(c *scenarioCase) string {
	if s.a == nil && c.cmd != "new" {
		s.new(map[string]string{})
	}
	arg := func(k string) string { return c.args[k] }
	res := func(k string) resources.Resources {
		if c.args[k] == "" {
			return nil
		}
		r, err := resources.Parse(c.args[k])
		if err != nil {
			s.t.Fatalf("%s: %s=%s: %v", c.pos, k, c.args[k], err)
		}
		return r
	}
	list := func(k string) []string {
		if c.args[k] == "" {
			return nil
		}
		return strings.Split(c.args[k], ",")
	}
	used := func() map[string]resources.Resources {
		if len(c.input) == 0 {
			return nil
		}
		m := map[string]resources.Resources{}
		for _, l := range c.input {
			k, v, _ := strings.Cut(l, " ")
			m[k] = resources.MustParse(v)
		}
		return m
	}
	var err error
	var out strings.Builder
	switch c.cmd {
	case "new":
		s.new(c.args)
	case "add-agent":
		var score float64
		if v := arg("score"); v != "" {
			score, _ = strconv.ParseFloat(v, 64)
		}
		err = s.a.AddAgent(AgentInfo{ID: arg("id"), Total: res("total"), Revocable: res("revocable"), Score: score}, used())
	case "remove-agent":
		err = s.a.RemoveAgent(arg("id"))
	case "update-revocable":
		var rescinded []Offer
		rescinded, err = s.a.UpdateRevocable(arg("id"), res("revocable"))
		for _, o := range rescinded {
			fmt.Fprintf(&out, "rescinded %s %s %s %s\n", o.FrameworkID, o.AgentID, o.Role, o.Resources)
		}
	case "add-framework":
		info := FrameworkInfo{ID: arg("id"), Roles: list("roles"), Capabilities: Capabilities{Revocable: c.flags["revocable"]},
			SuppressedRoles: list("suppressed"), OfferFilter: OfferFilter{Agents: list("agents"), MinFree: res("min-free")}}
		err = s.a.AddFramework(info, used())
	case "remove-framework":
		err = s.a.RemoveFramework(arg("id"))
	case "allocate":
		for _, o := range s.a.Allocate() {
			fmt.Fprintf(&out, "%s %s %s %s\n", o.FrameworkID, o.AgentID, o.Role, o.Resources)
		}
	case "recover":
		var refuse *time.Duration
		if v := arg("refuse"); v != "" {
			d, perr := time.ParseDuration(v)
			if perr != nil {
				s.t.Fatalf("%s: refuse=%s: %v", c.pos, v, perr)
			}
			refuse = &d
		}
		err = s.a.RecoverRole(arg("fw"), arg("role"), arg("agent"), res("res"), refuse)
	case "suppress":
		s.a.Suppress(arg("fw"), list("roles")...)
	case "revive":
		s.a.Revive(arg("fw"), list("roles")...)
	case "quota":
		err = s.a.SetQuota(arg("role"), Quota{Guarantee: res("guarantee"), Limit: res("limit")})
	case "weight":
		w, _ := strconv.ParseFloat(arg("w"), 64)
		err = s.a.SetWeight(arg("role"), w)
	case "reserve":
		err = s.a.Reserve(arg("agent"), arg("role"), arg("principal"), res("res"))
	case "unreserve":
		err = s.a.Unreserve(arg("agent"), res("res"))
	case "advance":
		d, perr := time.ParseDuration(arg("d"))
		if perr != nil {
			s.t.Fatalf("%s: d=%s: %v", c.pos, arg("d"), perr)
		}
		s.clk.Advance(d)
	case "shares":
		for _, r := range s.a.Shares() {
			fmt.Fprintf(&out, "role %s weight %v share %v allocated %s\n", r.Role, r.Weight, r.Share, orNone(r.Allocated))
		}
		for _, f := range s.a.FrameworkShares() {
			sup := ""
			if f.Suppressed {
				sup = " suppressed"
			}
			fmt.Fprintf(&out, "framework %s role %s share %v allocated %s%s\n", f.FrameworkID, f.Role, f.Share, orNone(f.Allocated), sup)
		}
	default:
		s.t.Fatalf("%s: unknown command %q", c.pos, c.cmd)
	}
	if err != nil {
		fmt.Fprintf(&out, "error: %v (%s)\n", err, sentinelName(err))
	}
	return out.String()
}

func (s *scenario) new(args map[string]string) {
	opts := Options{Sorter: args["sorter"]}
	if v := args["seed"]; v != "" {
		opts.Seed, _ = strconv.ParseInt(v, 10, 64)
	}
	if v := args["min"]; v != "" {
		opts.MinAllocatable = resources.MustParse(v)
	}
	s.a, s.clk = newTest(s.t, opts)
}

func orNone(r resources.Resources) string {
	if r.IsEmpty() {
		return "nothing"
	}
	return r.String()
}

func sentinelName(err error) string {
	for _, s := range []struct {
		err  error
		name string
	}{{ErrNotFound, "ErrNotFound"}, {ErrExist, "ErrExist"}, {ErrInsufficient, "ErrInsufficient"}, {ErrRevocable, "ErrRevocable"}, {ErrInvalid, "ErrInvalid"}} {
		if errors.Is(err, s.err) {
			return s.name
		}
	}
	return "no sentinel"
}
