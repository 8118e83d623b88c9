package taskrunner

import (
	"testing"

	"github.com/brimnode/brim/agent"
)

// The agent offers the master its disk (less the image cache's cap, taken
// out by the daemon) beside cpus, mem and net_bw.
func TestOffered(t *testing.T) {
	for _, tc := range []struct {
		in   agent.Resources
		want string
	}{
		{agent.Resources{MilliCPUs: 1500, MemMiB: 1024}, "cpus:1.5;mem:1024"},
		{agent.Resources{MilliCPUs: 2000, MemMiB: 512, NetMbit: 100, DiskMiB: 300}, "cpus:2;disk:300;mem:512;net_bw:100"},
	} {
		got, err := offered(tc.in)
		if err != nil || got.String() != tc.want {
			t.Errorf("offered(%+v) = %s, %v; want %s", tc.in, got, err, tc.want)
		}
	}
}
