//go:build !unix

package main

import "time"

// threadCPU is not measured here: the CPU times print as 0.
func threadCPU() time.Duration { return 0 }
