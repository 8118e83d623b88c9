// Command lc-probe is a latency-critical request loop for interference
// experiments: it issues requests at a fixed rate (open loop), each doing a
// fixed amount of work — cpu work calibrated once at start, optionally a
// walk over a memory working set and a small synced write — and measures
// each request's latency from its scheduled start (so a stall counts for
// every request it delays). Every window it appends a CSV line (p50, p99,
// p999, max, mean in µs) to --out and prints it; at the end (--duration, or
// SIGTERM/SIGINT) it writes a JSON summary of the whole run to --summary.
//
// It is meant to run inside a brim container (the host root is mounted
// read-only there, so a static binary anywhere on the host outside /tmp
// and the agent's state dir is visible at the same path; /mnt/sandbox is
// the writable sandbox):
//
//	CGO_ENABLED=0 go build -o /var/tmp/lc-probe ./examples/lc-probe
//	brim container run --name lc --cpus 0.5 --mem 64 -- \
//	    /var/tmp/lc-probe --rate 100 --work 200us --fsync-bytes 4096 --duration 60s
//
// It cannot reach the agent's socket (root only, not mounted in the
// container); `brim experiment` (lc.report) tails --out and forwards each
// window as `brim agent report-latency ID --p50 … --p99 … --p999 …` does.
//
// It uses only the standard library and never logs to anything but stderr.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"
)

// config is the probe's flags.
type config struct {
	rate       float64
	work       time.Duration
	duration   time.Duration
	window     time.Duration
	touchKiB   int
	fsyncBytes int
	dir        string
	out        string
	summary    string
	quiet      bool
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("lc-probe", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Float64Var(&c.rate, "rate", 100, "requests per second")
	fs.DurationVar(&c.work, "work", 200*time.Microsecond, "cpu work per request (calibrated once at start into a fixed loop count)")
	fs.DurationVar(&c.duration, "duration", 0, "how long to run (0: until SIGTERM or SIGINT)")
	fs.DurationVar(&c.window, "window", time.Second, "reporting window")
	fs.IntVar(&c.touchKiB, "touch-kib", 0, "memory working set walked by every request, KiB (0: none)")
	fs.IntVar(&c.fsyncBytes, "fsync-bytes", 0, "bytes written and fsynced to a file in --dir by every request (0: none)")
	fs.StringVar(&c.dir, "dir", "/mnt/sandbox", "directory of the synced file and the default outputs")
	fs.StringVar(&c.out, "out", "", "CSV of the windows (default DIR/lc-probe.csv)")
	fs.StringVar(&c.summary, "summary", "", "JSON summary of the run (default DIR/lc-probe.json)")
	fs.BoolVar(&c.quiet, "quiet", false, "do not print the windows on stdout")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	switch {
	case fs.NArg() != 0:
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	case c.rate <= 0 || c.rate > 100000:
		return c, fmt.Errorf("--rate %g: want 0 < rate ≤ 100000", c.rate)
	case c.work < 0 || c.duration < 0 || c.touchKiB < 0 || c.fsyncBytes < 0:
		return c, errors.New("--work, --duration, --touch-kib and --fsync-bytes must not be negative")
	case c.window < 10*time.Millisecond:
		return c, fmt.Errorf("--window %v: want at least 10ms", c.window)
	}
	if c.out == "" {
		c.out = filepath.Join(c.dir, "lc-probe.csv")
	}
	if c.summary == "" {
		c.summary = filepath.Join(c.dir, "lc-probe.json")
	}
	return c, nil
}

// csvHeader is the first line of --out.
const csvHeader = "unix_ms,requests,p50_us,p99_us,p999_us,max_us,mean_us\n"

func (w windowStats) csv() string {
	us := func(d time.Duration) int64 { return d.Microseconds() }
	return fmt.Sprintf("%d,%d,%d,%d,%d,%d,%d\n", w.End.UnixMilli(), w.Requests, us(w.P50), us(w.P99), us(w.P999), us(w.Max), us(w.Mean))
}

// summary is the JSON written at the end. Latencies are in microseconds.
type summary struct {
	Rate        float64 `json:"rate"`
	WorkUs      int64   `json:"workUs"`
	SpinsPerReq uint64  `json:"spinsPerRequest"`
	TouchKiB    int     `json:"touchKiB"`
	FsyncBytes  int     `json:"fsyncBytes"`
	Start       string  `json:"start"`
	End         string  `json:"end"`
	Requests    uint64  `json:"requests"`
	Windows     int     `json:"windows"`
	P50Us       int64   `json:"p50Us"`
	P99Us       int64   `json:"p99Us"`
	P999Us      int64   `json:"p999Us"`
	MaxUs       int64   `json:"maxUs"`
	MedianP99Us int64   `json:"medianWindowP99Us"`
	Interrupted bool    `json:"interrupted"`
	Precision   string  `json:"precision"`
	// Checksum of the cpu work, so the compiler cannot drop it.
	Checksum uint64 `json:"checksum"`
}

// spin is the request's cpu work: n rounds of xorshift, returned so the
// compiler keeps it.
func spin(n uint64) uint64 {
	x := uint64(88172645463325252)
	for range n {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
	}
	return x
}

// calibrate returns the number of spin rounds that take d on this cpu now
// (the best of several tries, so a busy machine at start inflates the
// work less).
func calibrate(d time.Duration) uint64 {
	if d <= 0 {
		return 0
	}
	const probe = 1 << 20
	best := time.Duration(1<<63 - 1)
	for range 5 {
		t := time.Now()
		sink ^= spin(probe)
		best = min(best, time.Since(t))
	}
	return max(1, uint64(float64(probe)*float64(d)/float64(max(best, time.Nanosecond))))
}

var sink uint64

// request is one request's work.
type request struct {
	spins uint64
	buf   []byte
	f     *os.File
	data  []byte
}

func (r *request) do() error {
	sink ^= spin(r.spins)
	for i := 0; i < len(r.buf); i += 64 {
		r.buf[i]++
	}
	if r.f != nil {
		if _, err := r.f.WriteAt(r.data, 0); err != nil {
			return fmt.Errorf("write: %w", err)
		}
		if err := r.f.Sync(); err != nil {
			return fmt.Errorf("fsync: %w", err)
		}
	}
	return nil
}

func main() {
	c, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "lc-probe:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if c.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.duration)
		defer cancel()
	}
	var stdout io.Writer = os.Stdout
	if c.quiet {
		stdout = io.Discard
	}
	if err := run(ctx, c, stdout); err != nil {
		fmt.Fprintln(os.Stderr, "lc-probe:", err)
		os.Exit(1)
	}
}

// run issues requests until ctx ends, writing windows and the summary.
func run(ctx context.Context, c config, stdout io.Writer) error {
	req := &request{spins: calibrate(c.work)}
	if c.touchKiB > 0 {
		req.buf = make([]byte, c.touchKiB<<10)
	}
	if c.fsyncBytes > 0 {
		f, err := os.OpenFile(filepath.Join(c.dir, "lc-probe.dat"), os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			return fmt.Errorf("open synced file: %w", err)
		}
		defer f.Close()
		req.f, req.data = f, make([]byte, c.fsyncBytes)
	}
	out, err := os.OpenFile(c.out, os.O_CREATE|os.O_WRONLY|os.O_TRUNC|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open windows file: %w", err)
	}
	defer out.Close()
	if _, err := io.WriteString(out, csvHeader); err != nil {
		return fmt.Errorf("write windows file: %w", err)
	}

	period := time.Duration(float64(time.Second) / c.rate)
	start := time.Now()
	all := newHistogram()
	var p99s []time.Duration
	lat := make([]time.Duration, 0, int(c.rate*c.window.Seconds())+16)
	next, winEnd := start, start.Add(c.window)
	timer := time.NewTimer(0)
	defer timer.Stop()
	flush := func(end time.Time) error {
		w := summarize(end, lat)
		lat = lat[:0]
		if w.Requests == 0 {
			return nil
		}
		p99s = append(p99s, w.P99)
		line := w.csv()
		fmt.Fprint(stdout, line)
		// One write per line: a reader tailing the file sees whole lines.
		if _, err := io.WriteString(out, line); err != nil {
			return fmt.Errorf("write windows file: %w", err)
		}
		return nil
	}
	interrupted := false
loop:
	for {
		if d := time.Until(next); d > 0 {
			timer.Reset(d)
			select {
			case <-ctx.Done():
				break loop
			case <-timer.C:
			}
		} else if ctx.Err() != nil {
			break
		}
		if err := req.do(); err != nil {
			return err
		}
		d := time.Since(next)
		lat = append(lat, d)
		all.add(d)
		next = next.Add(period)
		if !next.Before(winEnd) {
			if err := flush(winEnd); err != nil {
				return err
			}
			winEnd = winEnd.Add(c.window)
		}
	}
	if errors.Is(context.Cause(ctx), context.Canceled) {
		interrupted = true
	}
	if err := flush(time.Now()); err != nil {
		return err
	}
	return writeSummary(c, summary{
		Rate: c.rate, WorkUs: c.work.Microseconds(), SpinsPerReq: req.spins, TouchKiB: c.touchKiB, FsyncBytes: c.fsyncBytes,
		Start: start.UTC().Format(time.RFC3339Nano), End: time.Now().UTC().Format(time.RFC3339Nano),
		Requests: all.n, Windows: len(p99s),
		P50Us: all.quantile(0.5).Microseconds(), P99Us: all.quantile(0.99).Microseconds(),
		P999Us: all.quantile(0.999).Microseconds(), MaxUs: all.max.Microseconds(),
		MedianP99Us: medianOf(p99s).Microseconds(), Interrupted: interrupted,
		Precision: "run percentiles are histogram bucket bounds, at most 2% high",
		Checksum:  sink,
	})
}

func medianOf(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	summarize(time.Time{}, s) // sorts
	return s[(len(s)-1)/2]
}

// writeSummary writes the summary atomically (temp file, rename).
func writeSummary(c config, s summary) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("encode summary: %w", err)
	}
	tmp := c.summary + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write summary: %w", err)
	}
	if err := os.Rename(tmp, c.summary); err != nil {
		return fmt.Errorf("write summary: %w", err)
	}
	return nil
}
