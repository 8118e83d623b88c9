package discovery_test

import (
	"testing"

	"github.com/brimnode/brim/master/discovery"
)

// TestParseURL: the --store forms and their errors.
func TestParseURL(t *testing.T) {
	eps, prefix, err := discovery.ParseURL("etcd://10.0.0.1:2379,10.0.0.2:2379/brim/prod")
	if err != nil || len(eps) != 2 || eps[1] != "10.0.0.2:2379" || prefix != "/brim/prod" {
		t.Fatalf("ParseURL: %v %q %v", eps, prefix, err)
	}
	for _, bad := range []string{"etcd://10.0.0.1:2379", "etcd://10.0.0.1:2379/", "etcd://10.0.0.1/brim", "http://h:1/brim", "etcd://h:1,/brim", "etcd://h:1/brim?x=1"} {
		if _, _, err := discovery.ParseURL(bad); err == nil {
			t.Errorf("ParseURL(%q): no error", bad)
		}
	}
}
