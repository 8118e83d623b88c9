package monitor

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/brimnode/brim/isolator"
)

// hostCPUPressure is the host's cpu pressure file (PSI).
const hostCPUPressure = "/proc/pressure/cpu"

// readPressure reads a PSI file ("some avg10=… avg60=… avg300=…
// total=…" and optionally a "full" line). A missing file is returned as
// an error wrapping fs.ErrNotExist (a kernel without PSI).
func readPressure(path string) (isolator.PSI, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return isolator.PSI{}, fmt.Errorf("read pressure: %w", err)
	}
	p, err := parsePressure(string(b))
	if err != nil {
		return p, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

// parsePressure parses the text of a PSI file.
func parsePressure(text string) (isolator.PSI, error) {
	var p isolator.PSI
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		kind, rest, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok || (kind != "some" && kind != "full") {
			return p, fmt.Errorf("pressure line %q: want some|full avg10=… total=…", line)
		}
		var avg [3]float64
		var total time.Duration
		seen := 0
		for _, f := range strings.Fields(rest) {
			k, v, ok := strings.Cut(f, "=")
			if !ok {
				return p, fmt.Errorf("pressure field %q: want key=value", f)
			}
			var err error
			switch k {
			case "avg10", "avg60", "avg300":
				i := map[string]int{"avg10": 0, "avg60": 1, "avg300": 2}[k]
				avg[i], err = strconv.ParseFloat(v, 64)
			case "total":
				var us uint64
				us, err = strconv.ParseUint(v, 10, 64)
				total = time.Duration(us) * time.Microsecond
			default:
				continue
			}
			if err != nil {
				return p, fmt.Errorf("pressure field %q: %w", f, err)
			}
			seen++
		}
		if seen != 4 {
			return p, fmt.Errorf("pressure line %q: want avg10, avg60, avg300 and total", line)
		}
		if kind == "some" {
			p.SomeAvg10, p.SomeAvg60, p.SomeAvg300, p.SomeTotal = avg[0], avg[1], avg[2], total
		} else {
			p.FullAvg10, p.FullAvg60, p.FullAvg300, p.FullTotal = avg[0], avg[1], avg[2], total
		}
	}
	return p, nil
}
