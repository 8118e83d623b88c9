package cli

import (
	"bytes"
	"io"
	"os"
	"os/signal"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/brimnode/brim/agent/agentclient"
	"github.com/brimnode/brim/internal/cliout"
)

func newContainerStats(cl *agentClient) *cobra.Command {
	var (
		watch, noStream bool
		asJSON          bool
		interval        time.Duration
		format          string
	)
	cmd := &cobra.Command{
		Use:   "stats [--watch] [--format TEMPLATE|table TEMPLATE|json] [ID|NAME…]",
		Short: "Show containers' cpu, throttling, memory, pids and network (no arguments: every running one); --watch redraws in place",
		Long: `Show containers' cpu% over --interval, the share of that interval's CFS
periods in which the container was throttled (THROTTLED; "-" without a
quota), memory usage and limit, pids and network bytes, for the
containers named, or every running one (listed again each round).

One sample by default (--no-stream says so explicitly, as with Docker);
--watch samples every --interval. On a terminal --watch redraws the table
in place (no scrolling; lines cut at the terminal's width, redrawn when it
is resized); into a pipe or a file it writes one table per round.

--format is a Go template, as Docker's: fields ID, Name, Container,
CPUPerc, CPUs, Throttled, ThrottledTotal (periods and time since the
start), MemUsage, MemPerc, PIDs, OOMKills, NetIO, and the agent monitor's
scheduler signals RunQueue (run-queue latency p50/p99/p99.9 over the
monitor's latest interval, with its source: ebpf, or schedstat-mean, the
mean wait shown for all three) and OnCPU (cumulative on-cpu time); they
show "-" (null in --json) when the agent runs without a monitor or has
not sampled the container twice yet. 'table {{.ID}}\t{{.RunQueue}}' prints
a table, json one JSON object per line; --json an array of every figure.`,
		Args:              UsageArgs(cobra.ArbitraryArgs),
		ValidArgsFunction: cl.containerArgs(runningOnly, false),
		RunE: func(cmd *cobra.Command, args []string) error {
			if interval <= 0 {
				return ExitError{Code: 2, Msg: "--interval must be positive"}
			}
			if watch && noStream {
				return ExitError{Code: 2, Msg: "stats: --watch and --no-stream: give one"}
			}
			f, err := compileFormat(cmd, format, "json")
			if err != nil {
				return err
			}
			api, err := cl.dial()
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			var scr *screen
			if watch {
				scr = newScreen(out)
				defer scr.close()
			}
			err = agentclient.WatchStats(cmd.Context(), api, args, interval, watch, func(rows []agentclient.Stats) error {
				if scr == nil {
					return cliout.Stats(out, f, rows, asJSON)
				}
				var b bytes.Buffer
				if err := cliout.Stats(&b, f, rows, asJSON); err != nil {
					return err
				}
				return scr.draw(b.String())
			})
			return cl.rpcError(err)
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&watch, "watch", false, "sample every --interval until interrupted (on a terminal: redraw in place)")
	fl.BoolVar(&noStream, "no-stream", false, "one sample, then exit (the default; Docker's flag)")
	fl.BoolVar(&asJSON, "json", false, "print a JSON array of every figure")
	fl.StringVar(&format, "format", "", "Go template, 'table TEMPLATE' or json (see --help)")
	fl.DurationVar(&interval, "interval", time.Second, "sampling interval for cpu% and throttling")
	return cmd
}

// screen shows the rounds of a watch: on a terminal each over the last
// (cliout.Frame), redrawn at the terminal's new size when it is resized;
// on anything else (a pipe, a file) each below the last. close ends it;
// its resize goroutine is its own.
type screen struct {
	w   io.Writer
	tty *os.File // nil: w is no terminal

	mu      sync.Mutex
	last    string
	entered bool

	sigs chan os.Signal
	stop chan struct{}
	wg   sync.WaitGroup
}

func newScreen(w io.Writer) *screen {
	s := &screen{w: w}
	if f, ok := w.(*os.File); ok {
		if _, _, tty := terminalSize(f); tty {
			s.tty = f
		}
	}
	if s.tty == nil || len(resizeSignals) == 0 {
		return s
	}
	s.sigs, s.stop = make(chan os.Signal, 1), make(chan struct{})
	signal.Notify(s.sigs, resizeSignals...)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			select {
			case <-s.stop:
				return
			case <-s.sigs:
				s.mu.Lock()
				_ = s.paintLocked() // best effort: the next round draws again
				s.mu.Unlock()
			}
		}
	}()
	return s
}

// draw shows text, a round's table.
func (s *screen) draw(text string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last = text
	if s.tty == nil {
		_, err := io.WriteString(s.w, text+"\n")
		return err
	}
	return s.paintLocked()
}

func (s *screen) paintLocked() error {
	if s.last == "" {
		return nil
	}
	if !s.entered {
		if _, err := io.WriteString(s.tty, cliout.ScreenEnter); err != nil {
			return err
		}
		s.entered = true
	}
	cols, rows, _ := terminalSize(s.tty)
	_, err := s.tty.Write(cliout.Frame(s.last, cols, rows))
	return err
}

// close stops the resize handling and gives the cursor back.
func (s *screen) close() {
	if s.sigs != nil {
		signal.Stop(s.sigs)
		close(s.stop)
		s.wg.Wait()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.entered {
		_, _ = io.WriteString(s.tty, cliout.ScreenLeave) // the command ends either way
	}
}
