//go:build !linux

package monitor

import "fmt"

type selfUsage struct {
	user, system float64
	rss          uint64
}

func readSelf() (selfUsage, error) {
	return selfUsage{}, fmt.Errorf("read own usage: %w", ErrNotSupported)
}
