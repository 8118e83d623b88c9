package runner

import (
	"fmt"
	"strconv"

	"github.com/brimnode/brim/resources"
)

// TaskIDs are the IDs of n copies of the task id (Config.IDs): id itself
// for one copy, id-0, id-1, … for more.
func TaskIDs(id string, n int) []string {
	if n <= 1 {
		return []string{id}
	}
	ids := make([]string, 0, n)
	for i := range n {
		ids = append(ids, fmt.Sprintf("%s-%d", id, i))
	}
	return ids
}

// Want is what one task of milliCPUs thousandths of a cpu, memMiB MiB and
// netMbit Mbit/s of bandwidth (net_bw, 0: none) asks for (Config.Want),
// on revocable resources when revocable. Bandwidth is never revocable
// (estimators lend cpus and memory only). Errors are resources.Parse's,
// or name the revocable bandwidth.
func Want(milliCPUs, memMiB, netMbit int64, revocable bool) (resources.Resources, error) {
	rev := ""
	if revocable {
		rev = "{REV}"
	}
	cpus := strconv.FormatFloat(float64(milliCPUs)/1000, 'f', -1, 64)
	text := fmt.Sprintf("cpus%s:%s;mem%s:%d", rev, cpus, rev, memMiB)
	switch {
	case netMbit > 0 && revocable:
		return resources.Resources{}, fmt.Errorf("net_bw %d: bandwidth is never revocable (estimators lend cpus and memory only)", netMbit)
	case netMbit > 0:
		text += fmt.Sprintf(";net_bw:%d", netMbit)
	case netMbit < 0:
		return resources.Resources{}, fmt.Errorf("net_bw %d: must not be negative", netMbit)
	}
	return resources.Parse(text)
}
