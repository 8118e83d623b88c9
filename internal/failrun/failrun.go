package failrun

import (
	"log/slog"
	"sync"
	"time"
)

// DefaultEvery is the shortest time between two warnings of one run when
// Logger.Every is zero.
const DefaultEvery = time.Minute

// Logger logs one thing's runs of failures. The zero value is ready; it is
// safe for concurrent use.
type Logger struct {
	// Every is the shortest time between two warnings of one run
	// (0: DefaultEvery).
	Every time.Duration

	mu       sync.Mutex
	failed   int       // failures in a row
	unlogged int       // of which not yet in a warning
	warned   time.Time // last warning
}

// Failure records a failure at now and, when due, warns msg with err and
// failed_rounds (the failures since the previous warning, this one
// included).
func (l *Logger) Failure(log *slog.Logger, msg string, err error, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.failed++
	l.unlogged++
	every := l.Every
	if every <= 0 {
		every = DefaultEvery
	}
	if l.failed == 1 || now.Sub(l.warned) >= every {
		log.Warn(msg, "err", err, "failed_rounds", l.unlogged)
		l.warned, l.unlogged = now, 0
	}
}

// Success records a success; the first after a run of failures logs msg
// with failed_rounds, the length of the run.
func (l *Logger) Success(log *slog.Logger, msg string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.failed > 0 {
		log.Info(msg, "failed_rounds", l.failed)
		l.failed, l.unlogged = 0, 0
	}
}
