package runner

import (
	"strings"
	"testing"

	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
	"github.com/brimnode/brim/resources"
)

func offer(id, agent, res string) *pb.Offer { return &pb.Offer{Id: id, AgentId: agent, Resources: res} }

func tasks(ids ...string) []task {
	var out []task
	for _, id := range ids {
		out = append(out, task{ID: id, Name: "n-" + id})
	}
	return out
}

// plan renders match's result: "offer:task=res,task=res/refuse" per
// launch, then "decline:ids".
func plan(launches []launch, decline, noFit []string) string {
	var parts []string
	for _, l := range launches {
		var ts []string
		for _, t := range l.tasks {
			ts = append(ts, t.TaskId+"="+t.Resources)
		}
		parts = append(parts, l.offer.Id+":"+strings.Join(ts, ",")+"/"+formatRefuse(l.refuse))
	}
	if len(decline) > 0 {
		parts = append(parts, "decline:"+strings.Join(decline, ","))
	}
	if len(noFit) > 0 {
		parts = append(parts, "nofit:"+strings.Join(noFit, ","))
	}
	return strings.Join(parts, " ")
}

func formatRefuse(f float64) string {
	switch f {
	case 0:
		return "0"
	case doneRefuse:
		return "5"
	}
	return "?"
}

func TestMatch(t *testing.T) {
	small := "cpus:0.5;mem:128"
	for _, tc := range []struct {
		name     string
		offers   []*pb.Offer
		pending  []task
		want     string
		role     string
		perOffer int
		plan     string
	}{
		{"one task, one offer", []*pb.Offer{offer("o1", "a1", "cpus:2;mem:1024")}, tasks("t"), small, "", 0,
			"o1:t=cpus:0.5;mem:128/5"},
		{"nothing pending: everything declined", []*pb.Offer{offer("o1", "a1", "cpus:2;mem:1024")}, nil, small, "", 0,
			"decline:o1"},
		{"too small: declined", []*pb.Offer{offer("o1", "a1", "cpus:0.25;mem:1024"), offer("o2", "a2", "cpus:4;mem:64")}, tasks("t"), small, "", 0,
			"decline:o1,o2 nofit:o1,o2"},
		{"unparsable offer declined, next one used", []*pb.Offer{offer("o1", "a1", "cpus:"), offer("o2", "a2", "cpus:1;mem:256")}, tasks("t"), small, "", 0,
			"o2:t=cpus:0.5;mem:128/5 decline:o1 nofit:o1"},
		{"as many as fit, rest to the next offer", []*pb.Offer{offer("o1", "a1", "cpus:1;mem:1024"), offer("o2", "a2", "cpus:4;mem:4096")}, tasks("t0", "t1", "t2"), small, "", 0,
			"o1:t0=cpus:0.5;mem:128,t1=cpus:0.5;mem:128/0 o2:t2=cpus:0.5;mem:128/5"},
		{"remaining tasks: refuse 0", []*pb.Offer{offer("o1", "a1", "cpus:1;mem:1024")}, tasks("t0", "t1", "t2"), small, "", 0,
			"o1:t0=cpus:0.5;mem:128,t1=cpus:0.5;mem:128/0"},
		{"per offer cap", []*pb.Offer{offer("o1", "a1", "cpus:4;mem:4096"), offer("o2", "a2", "cpus:4;mem:4096")}, tasks("t0", "t1", "t2"), small, "", 1,
			"o1:t0=cpus:0.5;mem:128/0 o2:t1=cpus:0.5;mem:128/0"},
		{"offers after all launched are declined", []*pb.Offer{offer("o1", "a1", "cpus:4;mem:4096"), offer("o2", "a2", "cpus:4;mem:4096")}, tasks("t"), small, "", 0,
			"o1:t=cpus:0.5;mem:128/5 decline:o2"},
		{"reserved for the role", []*pb.Offer{offer("o1", "a1", "cpus(web):1;mem(web):512")}, tasks("t"), small, "web", 0,
			"o1:t=cpus(web):0.5;mem(web):128/5"},
		{"reserved for another role", []*pb.Offer{offer("o1", "a1", "cpus(ads):1;mem(ads):512")}, tasks("t"), small, "web", 0,
			"decline:o1 nofit:o1"},
		{"revocable wanted, only regular offered", []*pb.Offer{offer("o1", "a1", "cpus:1;mem:512")}, tasks("t"), "cpus{REV}:0.5;mem{REV}:128", "", 0,
			"decline:o1 nofit:o1"},
		{"revocable", []*pb.Offer{offer("o1", "a1", "cpus:1;mem:512;cpus{REV}:1;mem{REV}:512")}, tasks("t"), "cpus{REV}:0.5;mem{REV}:128", "", 0,
			"o1:t=cpus{REV}:0.5;mem{REV}:128/5"},
	} {
		s := spec{command: []string{"true"}, want: resources.MustParse(tc.want), role: tc.role, perOffer: tc.perOffer}
		launches, decline, noFit := match(tc.offers, tc.pending, s)
		if got := plan(launches, decline, noFit); got != tc.plan {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.plan)
		}
		for _, l := range launches {
			for _, ti := range l.tasks {
				if ti.Name != "n-"+ti.TaskId || len(ti.Command) != 1 || ti.Command[0] != "true" {
					t.Errorf("%s: task %+v not made from the template", tc.name, ti)
				}
			}
		}
	}
}

func TestLargest(t *testing.T) {
	free := map[string]resources.Resources{
		"a2": resources.MustParse("cpus:2;mem:512"),
		"a1": resources.MustParse("cpus:1;mem:2048;disk:100"),
		"a3": resources.MustParse("cpus:2;mem:64"),
	}
	for _, tc := range []struct {
		want, got string
	}{
		{"cpus:4;mem:64", "cpus 2 on agent a2, mem 2048 on agent a1"},
		{"mem:4096", "mem 2048 on agent a1"},
		{"cpus:1;gpus:1", "cpus 2 on agent a2, gpus 0 on agent a1"},
	} {
		if got := largest(free, resources.MustParse(tc.want)); got != tc.got {
			t.Errorf("largest for %s: %q, want %q", tc.want, got, tc.got)
		}
	}
	if got := largest(nil, resources.MustParse("cpus:1")); got != "" {
		t.Errorf("no agents: %q", got)
	}
}

func TestDialCause(t *testing.T) {
	for in, want := range map[string]string{
		`connection error: desc = "transport: Error while dialing: dial tcp 127.0.0.1:1: connect: connection refused"`: "dial tcp 127.0.0.1:1: connect: connection refused",
		`connection error: desc = "transport: authentication handshake failed: EOF"`:                                   "authentication handshake failed: EOF",
		`connection error: desc = "error reading server preface: EOF"`:                                                 `connection error: desc = "error reading server preface: EOF"`,
		"something else": "something else",
	} {
		if got := dialCause(in); got != want {
			t.Errorf("dialCause(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestWaiting(t *testing.T) {
	for _, tc := range []struct {
		name                string
		connected           bool
		launched, pending   int
		stopping, waitsHere bool
	}{
		{"no master yet", false, 0, 1, false, true},
		{"master lost with tasks running", false, 2, 0, false, true},
		{"first offer awaited", true, 0, 3, false, true},
		{"one copy launched: the rest wait for resources unbounded", true, 1, 2, false, false},
		{"all launched", true, 3, 0, false, false},
		{"stopping", true, 0, 0, true, false},
		{"stopping, pending given up", true, 0, 2, true, false},
	} {
		if got := waiting(tc.connected, tc.launched, tc.pending, tc.stopping); got != tc.waitsHere {
			t.Errorf("%s: waiting = %v", tc.name, got)
		}
	}
}
