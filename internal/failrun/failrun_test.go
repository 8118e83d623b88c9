package failrun

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"testing"
	"time"
)

// records collects "LEVEL message failed_rounds=N" lines.
type records struct{ lines []string }

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	s := rec.Level.String() + " " + rec.Message
	rec.Attrs(func(a slog.Attr) bool {
		if a.Key == "failed_rounds" {
			s += " failed_rounds=" + a.Value.String()
		}
		return true
	})
	r.lines = append(r.lines, s)
	return nil
}
func (r *records) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *records) WithGroup(string) slog.Handler      { return r }

func TestLogger(t *testing.T) {
	rec := &records{}
	log := slog.New(rec)
	l := &Logger{Every: 10 * time.Second}
	t0 := time.Unix(1000, 0)
	boom := errors.New("boom")
	l.Success(log, "ok again") // nothing failed: silent
	for i := range 25 {        // one failure a second for 25 s
		l.Failure(log, "failed", boom, t0.Add(time.Duration(i)*time.Second))
	}
	l.Success(log, "ok again")
	l.Success(log, "ok again")
	l.Failure(log, "failed", boom, t0.Add(30*time.Second))
	want := []string{
		"WARN failed failed_rounds=1",  // at once
		"WARN failed failed_rounds=10", // t0+10 s: failures 2..11
		"WARN failed failed_rounds=10", // t0+20 s
		"INFO ok again failed_rounds=25",
		"WARN failed failed_rounds=1", // a new run warns at once
	}
	if !slices.Equal(rec.lines, want) {
		t.Fatalf("logged\n%q\nwant\n%q", rec.lines, want)
	}
	var zero Logger // Every 0: DefaultEvery
	rec.lines = nil
	zero.Failure(log, "failed", boom, t0)
	zero.Failure(log, "failed", boom, t0.Add(DefaultEvery-time.Second))
	zero.Failure(log, "failed", boom, t0.Add(DefaultEvery))
	if want := []string{"WARN failed failed_rounds=1", "WARN failed failed_rounds=2"}; !slices.Equal(rec.lines, want) {
		t.Fatalf("zero Every: logged %q, want %q", rec.lines, want)
	}
}
