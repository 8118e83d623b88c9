package logging

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/sirupsen/logrus"
)

// New returns a logger writing to w at level ("debug", "info", "warn",
// "error") in format ("text" or "json"). With lv the level is held in lv
// (set to level here), so it can change later (a reload); nil: fixed.
// Errors name the flag and the value.
func New(w io.Writer, level, format string, lv *slog.LevelVar) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	var leveler slog.Leveler = l
	if lv != nil {
		lv.Set(l)
		leveler = lv
	}
	opts := &slog.HandlerOptions{Level: leveler}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}

// RouteLogrus sends libcontainer's global logrus output into log (component
// "libcontainer") instead of stderr. Call it once per process.
func RouteLogrus(log *slog.Logger) {
	logrus.SetOutput(io.Discard)
	logrus.SetLevel(logrus.DebugLevel)
	logrus.AddHook(logrusHook{log.With("component", "libcontainer")})
}

// logrusHook re-logs each logrus entry through slog at the matching level.
type logrusHook struct{ log *slog.Logger }

func (logrusHook) Levels() []logrus.Level { return logrus.AllLevels }

func (h logrusHook) Fire(e *logrus.Entry) error {
	lv := slog.LevelDebug
	switch {
	case e.Level <= logrus.ErrorLevel:
		lv = slog.LevelError
	case e.Level == logrus.WarnLevel:
		lv = slog.LevelWarn
	case e.Level == logrus.InfoLevel:
		lv = slog.LevelInfo
	}
	args := make([]any, 0, 2*len(e.Data))
	for k, v := range e.Data {
		args = append(args, k, v)
	}
	h.log.Log(context.Background(), lv, e.Message, args...)
	return nil
}
