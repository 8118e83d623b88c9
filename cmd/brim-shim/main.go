//go:debug containermaxprocs=0
//go:debug updatemaxprocs=0

// Command brim-shim is the container shim alone: the same code and command
// line as `brim shim` (package executor), in a binary that links nothing
// else. Every container start executes the shim binary twice (the shim,
// then libcontainer's "init" re-exec inside the new namespaces), and each
// exec of the full brim binary pays for the start-up of every package
// linked into it (gRPC, protobuf, Prometheus, …: about 4 ms idle, several
// times that on a loaded host). With this binary a launch matches `runc
// run -d` (bench/10-launch.bench.sh); point containerizer.Config.ShimBinary
// at it. Usage: brim-shim shim --bundle DIR [--handshake], or
// brim-shim shim --handshake [--recycle] [--prepare] for a warm shim.
//
// The shim and the container inits it starts need no GOMAXPROCS sized to
// a cgroup quota: the go:debug settings atop this file keep the runtime from
// sizing it so and from reading the cgroup again every second (Go 1.26
// still opens it once at start, to count whether the setting mattered).
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"syscall"

	"github.com/opencontainers/runc/libcontainer"
	_ "github.com/opencontainers/runc/libcontainer/nsenter"

	// A warm sandbox's exec trampoline runs before the Go runtime (a C
	// constructor, as nsenter's).
	_ "github.com/brimnode/brim/executor/trampoline"

	"github.com/brimnode/brim/executor"
)

func init() {
	// libcontainer re-executes this binary as "<argv0> init" inside every
	// new container: dispatch before anything else runs.
	if len(os.Args) > 1 && os.Args[1] == "init" {
		runtime.GOMAXPROCS(1)
		runtime.LockOSThread()
		libcontainer.Init() // never returns
	}
	// Keep libcontainer's setns goroutines off the main thread
	// (PLATFORM.md).
	runtime.LockOSThread()
}

func main() {
	if len(os.Args) < 2 || os.Args[1] != "shim" {
		fmt.Fprintln(os.Stderr, "usage: brim-shim shim --bundle DIR [--handshake]")
		os.Exit(2)
	}
	fs := flag.NewFlagSet("shim", flag.ExitOnError)
	dir := fs.String("bundle", "", "container directory holding "+executor.BundleFile+" (empty: read from fd 4)")
	handshake := fs.Bool("handshake", false, "report on fd 3 and wait for the go-ahead on fd 4")
	recycle := fs.Bool("recycle", false, `after the container ends, report "free" on fd 3 and wait for another (a warm shim only)`)
	prepare := fs.Bool("prepare", false, "make the next container's network, IPC and UTS namespaces and its /dev, /tmp and /sys mounts while waiting for it (a warm shim only)")
	_ = fs.Parse(os.Args[2:])
	if *dir == "" && !*handshake {
		fmt.Fprintln(os.Stderr, "brim-shim: --bundle is required without --handshake")
		os.Exit(2)
	}
	if (*recycle || *prepare) && (*dir != "" || !*handshake) {
		fmt.Fprintln(os.Stderr, "brim-shim: --recycle and --prepare are for a warm shim (--handshake without --bundle)")
		os.Exit(2)
	}
	// The container outlives signals to the shim: only its exit ends the
	// shim. Handled, not ignored: ignored dispositions would be inherited
	// by the container's processes.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	log := slog.New(slog.NewTextHandler(os.Stderr, nil)).With("component", "shim")
	opts := executor.RunOptions{Dir: *dir, Log: log, Recycle: *recycle, Prepare: *prepare}
	if *handshake {
		opts.Report = os.NewFile(executor.ReportFD, "report")
		opts.GoAhead = os.NewFile(executor.GoFD, "go-ahead")
	}
	if err := executor.Run(context.Background(), opts); err != nil {
		fmt.Fprintln(os.Stderr, "brim-shim:", err)
		os.Exit(1)
	}
}
