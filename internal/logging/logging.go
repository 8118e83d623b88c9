package logging

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/sirupsen/logrus"
)

// ComponentKey is the attribute naming the part of a daemon a log line
// comes from ("agent", "qos", "estimator", …). Loggers built by New keep
// one per line: a logger's With(ComponentKey, X) replaces the component it
// had, and a record's own component replaces the logger's.
const ComponentKey = "component"

// New returns a logger writing to w at level ("debug", "info", "warn",
// "error") in format ("text" or "json"). With lv the level is held in lv (set to level here), so it
// can change later (a reload); nil: fixed. Durations are written as Go
// durations ("1.5s") in both formats, never as nanosecond integers; one
// ComponentKey per line. Errors name the flag and the value.
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
	opts := &slog.HandlerOptions{Level: leveler, ReplaceAttr: durationText}
	var h slog.Handler
	switch format {
	case "text":
		h = slog.NewTextHandler(w, opts)
	case "json":
		h = slog.NewJSONHandler(w, opts)
	default:
		return nil, fmt.Errorf("--log-format %q: want text or json", format)
	}
	return slog.New(OneComponent(h)), nil
}

// durationText writes a duration as its Go text ("1.5s"): slog's JSON
// handler writes nanoseconds, which a reader takes for seconds.
func durationText(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
}

// OneComponent wraps h so that every line carries at most one
// ComponentKey attribute, the innermost: a logger given a component by
// its owner and again by the package it is passed to (a plugin host
// naming its own) would write the key twice, which JSON readers resolve
// each their own way. The component is kept out of h's attributes and
// added to each record, before any group is opened (so it stays at the
// top level). Safe for concurrent use as h is.
func OneComponent(h slog.Handler) slog.Handler { return &oneComponent{h: h} }

type oneComponent struct {
	h    slog.Handler
	comp slog.Value
	has  bool // comp is set and not yet written into h
}

func (o *oneComponent) Enabled(ctx context.Context, l slog.Level) bool { return o.h.Enabled(ctx, l) }

func (o *oneComponent) WithAttrs(as []slog.Attr) slog.Handler {
	next := *o
	kept := make([]slog.Attr, 0, len(as))
	for _, a := range as {
		if a.Key == ComponentKey {
			next.comp, next.has = a.Value, true
			continue
		}
		kept = append(kept, a)
	}
	if len(kept) > 0 {
		next.h = o.h.WithAttrs(kept)
	}
	return &next
}

// WithGroup writes the component at the top level first: what follows
// goes into the group, where a ComponentKey is an ordinary attribute.
func (o *oneComponent) WithGroup(name string) slog.Handler {
	if name == "" {
		return o
	}
	h := o.h
	if o.has {
		h = h.WithAttrs([]slog.Attr{{Key: ComponentKey, Value: o.comp}})
	}
	return &grouped{h.WithGroup(name)}
}

func (o *oneComponent) Handle(ctx context.Context, r slog.Record) error {
	comp, has := o.comp, o.has
	own := false
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == ComponentKey {
			comp, has, own = a.Value, true, true
		}
		return true
	})
	if !has {
		return o.h.Handle(ctx, r)
	}
	out := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	out.AddAttrs(slog.Attr{Key: ComponentKey, Value: comp})
	r.Attrs(func(a slog.Attr) bool {
		if !own || a.Key != ComponentKey {
			out.AddAttrs(a)
		}
		return true
	})
	return o.h.Handle(ctx, out)
}

// grouped is a oneComponent below a group: nothing more to keep apart.
type grouped struct{ h slog.Handler }

func (g *grouped) Enabled(ctx context.Context, l slog.Level) bool  { return g.h.Enabled(ctx, l) }
func (g *grouped) WithAttrs(as []slog.Attr) slog.Handler           { return &grouped{g.h.WithAttrs(as)} }
func (g *grouped) WithGroup(name string) slog.Handler              { return &grouped{g.h.WithGroup(name)} }
func (g *grouped) Handle(ctx context.Context, r slog.Record) error { return g.h.Handle(ctx, r) }

// RouteLogrus sends libcontainer's global logrus output into log (component
// "libcontainer") instead of stderr. Call it once per process.
func RouteLogrus(log *slog.Logger) {
	logrus.SetOutput(io.Discard)
	logrus.SetLevel(logrus.DebugLevel)
	logrus.AddHook(logrusHook{log.With(ComponentKey, "libcontainer")})
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
