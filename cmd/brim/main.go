// Command brim is the single brim binary: agent, master, shim, CLI.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	// Demands may name a time zone ("2026-11-26 03:00:00 Europe/Paris"):
	// the zone database comes with the binary where the host has none.
	_ "time/tzdata"

	"github.com/opencontainers/runc/libcontainer"
	_ "github.com/opencontainers/runc/libcontainer/nsenter"

	// A warm sandbox's exec trampoline runs before the Go runtime (a C
	// constructor, as nsenter's).
	_ "github.com/brimnode/brim/executor/trampoline"

	"github.com/brimnode/brim/cli"
)

func init() {
	// libcontainer re-executes this binary as "<argv0> init" inside every new
	// container; that must be dispatched before anything else runs.
	if len(os.Args) > 1 && os.Args[1] == "init" {
		runtime.GOMAXPROCS(1)
		runtime.LockOSThread()
		libcontainer.Init() // never returns
	}
	// libcontainer starts goroutines that setns() into a container's mount
	// namespace and never unlock their thread; keep them off the main thread
	// or the daemon ends up inside a container (PLATFORM.md).
	runtime.LockOSThread()
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := newRootCommand()
	if err := root.ExecuteContext(ctx); err != nil {
		var ee cli.ExitError
		if errors.As(err, &ee) {
			if ee.Msg != "" {
				fmt.Fprintln(os.Stderr, "brim:", ee.Msg)
			}
			os.Exit(ee.Code)
		}
		fmt.Fprintln(os.Stderr, "brim:", err)
		os.Exit(1)
	}
}
