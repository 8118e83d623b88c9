package bytesize

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// units are the suffixes Parse knows, longest first; every one is binary
// (k = KiB = 1024), as Docker's and Kubernetes' log sizes are.
var units = []struct {
	suffix string
	shift  uint
}{
	{"KiB", 10}, {"MiB", 20}, {"GiB", 30}, {"TiB", 40},
	{"KB", 10}, {"MB", 20}, {"GB", 30}, {"TB", 40},
	{"k", 10}, {"m", 20}, {"g", 30}, {"t", 40},
	{"K", 10}, {"M", 20}, {"G", 30}, {"T", 40},
	{"B", 0},
}

// Parse reads a size: digits, optionally followed by a unit (k, m, g, t,
// KiB, MiB, GiB, TiB, KB, MB, … — all binary — or B). The error names
// the text.
func Parse(s string) (int64, error) {
	t := strings.TrimSpace(s)
	shift := uint(0)
	for _, u := range units {
		if strings.HasSuffix(t, u.suffix) {
			t, shift = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.shift
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("size %q: want a whole number of bytes, optionally with a unit (512k, 10MiB, 1g)", s)
	}
	if n > math.MaxInt64>>shift {
		return 0, errors.New("size " + strconv.Quote(s) + ": too large")
	}
	return n << shift, nil
}

// Format prints n with the largest binary unit that divides it ("10MiB",
// "1536KiB", "100B").
func Format(n int64) string {
	for _, u := range []struct {
		suffix string
		shift  uint
	}{{"TiB", 40}, {"GiB", 30}, {"MiB", 20}, {"KiB", 10}} {
		if n != 0 && n%(1<<u.shift) == 0 {
			return strconv.FormatInt(n>>u.shift, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10) + "B"
}
