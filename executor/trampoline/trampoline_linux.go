//go:build linux && cgo

package trampoline

// The constructor in trampoline.c runs before the Go runtime starts.

/*
#cgo CFLAGS: -Wall -Werror -std=gnu11
*/
import "C"
