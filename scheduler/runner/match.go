package runner

import (
	"fmt"
	"sort"
	"strings"

	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
	"github.com/brimnode/brim/resources"
)

// task is a task not launched yet.
type task struct {
	ID, Name string
}

// spec is what every task of a run asks for.
type spec struct {
	command, env []string
	user         string // TaskInfo.user
	userns       bool   // TaskInfo.userns
	// image, imagePull, imageRW: TaskInfo.image, image_pull,
	// image_read_write.
	image, imagePull string
	imageRW          bool
	want             resources.Resources
	// role, when set, lets tasks use resources reserved for it.
	role string
	// perOffer caps the tasks launched on one offer (0: no cap).
	perOffer int
}

// launch is the tasks to launch on one offer.
type launch struct {
	offer *pb.Offer
	tasks []*pb.TaskInfo
	// refuse is how long, in seconds, the rest of the offer is declined.
	refuse float64
}

// Seconds offers are declined for: an offer that fits nothing, and what
// remains of an offer once no task waits.
const (
	declineRefuse = 30
	doneRefuse    = 5
)

// match assigns pending tasks, in order, to offers: on each offer as many
// copies of s.want as fit (at most s.perOffer). Offers that take no task
// (or whose resources do not parse) are returned in decline; those of
// them that a task waited for and could not fit in (not those left over
// once every task was placed) in noFit too.
func match(offers []*pb.Offer, pending []task, s spec) (launches []launch, decline, noFit []string) {
	for _, o := range offers {
		have, err := resources.Parse(o.Resources)
		var tasks []*pb.TaskInfo
		for err == nil && len(tasks) < len(pending) && (s.perOffer == 0 || len(tasks) < s.perOffer) {
			res := fitting(have, s.want, s.role)
			if res == nil {
				break
			}
			t := pending[len(tasks)]
			tasks = append(tasks, &pb.TaskInfo{TaskId: t.ID, Name: t.Name, Command: s.command, Env: s.env, Resources: res.String(),
				User: s.user, Userns: s.userns, Image: s.image, ImagePull: s.imagePull, ImageReadWrite: s.imageRW})
			have = have.Subtract(res)
		}
		if len(tasks) == 0 {
			decline = append(decline, o.Id)
			if len(pending) > 0 {
				noFit = append(noFit, o.Id)
			}
			continue
		}
		// While tasks remain, what is left goes back unfiltered: the
		// allocator offers it to whoever is furthest below its fair
		// share, possibly this framework again.
		refuse := float64(doneRefuse)
		if len(pending) > len(tasks) {
			refuse = 0
		}
		pending = pending[len(tasks):]
		launches = append(launches, launch{offer: o, tasks: tasks, refuse: refuse})
	}
	return launches, decline, noFit
}

// fitting returns the resources to ask of what an offer has left: want as
// unreserved or (when role is set) as reserved for role, or nil.
func fitting(have, want resources.Resources, role string) resources.Resources {
	if have.Contains(want) {
		return want
	}
	if role == "" {
		return nil
	}
	// Reserved for the role (statically or dynamically): take it from the
	// role's entries of the offer.
	reserved := have.Reserved(role)
	var out resources.Resources
	for _, w := range want {
		for _, e := range reserved {
			if e.Name == w.Name && e.Revocable == w.Revocable && e.Type == resources.Scalar && e.Scalar >= w.Scalar {
				e.Scalar = w.Scalar
				out = append(out, e)
				break
			}
		}
	}
	if len(out) != len(want) || !have.Contains(out) {
		return nil
	}
	return out
}

// largest says, for each scalar resource want names, the most of it any
// agent offered (free, by the agent's latest offer) and which agent:
// "cpus 2 on agent a1, mem 1024 on agent a2". Ties go to the first agent
// ID in order.
func largest(free map[string]resources.Resources, want resources.Resources) string {
	agents := make([]string, 0, len(free))
	for a := range free {
		agents = append(agents, a)
	}
	sort.Strings(agents)
	var parts []string
	seen := map[string]bool{}
	for _, w := range want {
		if w.Type != resources.Scalar || seen[w.Name] {
			continue
		}
		seen[w.Name] = true
		best, bestAgent := resources.Value(0), ""
		for _, a := range agents {
			if v := free[a].Scalar(w.Name); bestAgent == "" || v > best {
				best, bestAgent = v, a
			}
		}
		if bestAgent == "" {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %s on agent %s", w.Name, best, bestAgent))
	}
	return strings.Join(parts, ", ")
}
