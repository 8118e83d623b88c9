package cli

import "testing"

func TestMilliCPUs(t *testing.T) {
	for _, tc := range []struct {
		in   float64
		want int64
		ok   bool
	}{
		{0.1, 100, true}, {1.5, 1500, true}, {2, 2000, true}, {0.001, 1, true},
		{0, 0, false}, {-1, 0, false}, {0.0005, 0, false}, {1.2345, 0, false},
	} {
		got, err := milliCPUs(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("milliCPUs(%v) = %d, %v", tc.in, got, err)
		}
	}
}
