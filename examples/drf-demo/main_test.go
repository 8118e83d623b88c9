package main

import (
	"testing"

	"github.com/brimnode/brim/resources"
)

func TestFit(t *testing.T) {
	// The DRF paper's example scaled to a small host: 0.9 cpus, 1800 MiB.
	host := resources.MustParse("cpus:0.9;mem:1800")
	for _, tc := range []struct {
		name       string
		have, want string
		limit      int
		n          int
	}{
		{"A alone takes memory", host.String(), "cpus:0.1;mem:400", -1, 4},
		{"B alone takes cpus", host.String(), "cpus:0.3;mem:100", -1, 3},
		{"capped per offer", host.String(), "cpus:0.1;mem:400", 1, 1},
		{"cap above what fits", host.String(), "cpus:0.3;mem:100", 10, 3},
		{"limit zero", host.String(), "cpus:0.1;mem:100", 0, 0},
		{"what DRF leaves: no cpu", "mem:400", "cpus:0.1;mem:400", -1, 0},
		{"cpus but short of memory", "cpus:0.9;mem:300", "cpus:0.1;mem:400", -1, 0},
		{"exact fit", "cpus:0.6;mem:200", "cpus:0.3;mem:100", -1, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := fit(resources.MustParse(tc.have), resources.MustParse(tc.want), tc.limit)
			if got != tc.n {
				t.Errorf("fit(%s, %s, %d) = %d, want %d", tc.have, tc.want, tc.limit, got, tc.n)
			}
		})
	}
}

func TestLaunchLimit(t *testing.T) {
	for _, tc := range []struct {
		maxTasks, live, perOffer, want int
	}{
		{0, 0, 0, -1},
		{0, 5, 1, 1},
		{3, 0, 0, 3},
		{3, 2, 0, 1},
		{3, 3, 1, 0},
		{3, 4, 1, 0}, // more live than the cap (replaced tasks still ending)
		{5, 1, 2, 2},
		{5, 4, 2, 1},
	} {
		if got := launchLimit(tc.maxTasks, tc.live, tc.perOffer); got != tc.want {
			t.Errorf("launchLimit(max %d, live %d, per offer %d) = %d, want %d", tc.maxTasks, tc.live, tc.perOffer, got, tc.want)
		}
	}
}
