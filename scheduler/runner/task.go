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

// Want is what one task of milliCPUs thousandths of a cpu and memMiB MiB
// asks for (Config.Want), on revocable resources when revocable. Errors
// are resources.Parse's.
func Want(milliCPUs, memMiB int64, revocable bool) (resources.Resources, error) {
	rev := ""
	if revocable {
		rev = "{REV}"
	}
	cpus := strconv.FormatFloat(float64(milliCPUs)/1000, 'f', -1, 64)
	return resources.Parse(fmt.Sprintf("cpus%s:%s;mem%s:%d", rev, cpus, rev, memMiB))
}
